//! The portal in a real browser: headless Chromium from
//! Debian's packages (installed by `scripts/install-chromium` when missing),
//! driven over WebDriver (`caldera_chaos_tests::webdriver`) against a real
//! control plane and two agents with simulated GPUs. A tenant logs in by
//! pasting its token, submits the seed's request through the form (after the
//! form showed a validation error at the field it names, and a dry run), sees
//! it running on the overview and on its node's card, opens its task page and
//! releases it; a second tenant cannot open that task; the operator sees both
//! tenants. Each page is saved as a screenshot: into docs/portal/ with
//! `CALDERA_UPDATE_SCREENSHOTS=1`, else into a temporary directory.
use caldera_chaos_tests::webdriver::{Chromedriver, Session};
use caldera_chaos_tests::{wait_until, Agent, ControlPlane, OPERATOR_TOKEN};
use std::path::{Path, PathBuf};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const WAIT: Duration = Duration::from_secs(15);
const TASK: &str = "train_20240716_001";

/// The seed's request, sized to the simulated pool: 2 of node-a's 4 A100s.
const SEED: [(&str, &str); 9] = [
    ("task_id", TASK),
    ("resources.gpu.count", "2"),
    ("resources.gpu.memory_gb", "80"),
    ("resources.gpu.model", "A100"),
    ("resources.cpu.cores", "8"),
    ("resources.memory.size_gb", "32"),
    ("resources.disk.size_gb", "20"),
    ("duration", "01:00:00"),
    ("image", "registry.internal/deeplearning/pytorch:2.1-cu12.1"),
];

/// Where the screenshots go: the repository's docs/portal/ when asked to
/// update them, else a temporary directory (a test must not dirty the tree).
struct Shots {
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl Shots {
    fn new() -> Shots {
        if std::env::var("CALDERA_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/portal");
            std::fs::create_dir_all(&dir).unwrap();
            return Shots { dir, _tmp: None };
        }
        let tmp = tempfile::tempdir().unwrap();
        Shots {
            dir: tmp.path().to_path_buf(),
            _tmp: Some(tmp),
        }
    }

    /// Saves the viewport as `name.png`, checking it is a real PNG.
    fn take(&self, s: &Session, name: &str) {
        let png = s.screenshot().unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
        assert!(
            png.len() > 10_000,
            "{name}: {} bytes, an empty page?",
            png.len()
        );
        std::fs::write(self.dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// `[id="…"]`: the portal's ids hold dots (`field-resources.gpu.count`).
fn id(id: &str) -> String {
    format!("[id=\"{id}\"]")
}

/// Types `value` into the form field for spec path `path` (a select is set
/// by its value, as choosing the option would).
fn fill(s: &Session, path: &str, value: &str) {
    let e = s.wait_for(&id(&format!("field-{path}")), WAIT).unwrap();
    let tag = s
        .execute("return arguments[0].tagName;", vec![elem(&e)])
        .unwrap();
    if tag == "SELECT" {
        s.execute(
            "arguments[0].value = arguments[1];",
            vec![elem(&e), value.into()],
        )
        .unwrap();
    } else {
        s.clear(&e).unwrap();
        s.send_keys(&e, value).unwrap();
    }
}

/// An element as a script argument.
fn elem(e: &caldera_chaos_tests::webdriver::Element) -> serde_json::Value {
    e.as_argument()
}

/// Opens a page by its nav link and waits for it.
fn open(s: &Session, nav: &str, page: &str) {
    let link = s.wait_for(&format!("#nav-{nav}"), WAIT).unwrap();
    s.click(&link).unwrap();
    s.wait_for(&format!("body[data-page=\"{page}\"]"), WAIT)
        .unwrap();
}

fn log_in(s: &Session, url: &str, token: &str) {
    s.navigate(&format!("{url}/login")).unwrap();
    let field = s.wait_for("#login-token", WAIT).unwrap();
    s.send_keys(&field, token).unwrap();
    s.click(&s.wait_for("#login-submit", WAIT).unwrap())
        .unwrap();
    s.wait_for("body[data-page=\"overview\"]", WAIT).unwrap();
}

fn log_out(s: &Session) {
    s.click(&s.wait_for("#logout", WAIT).unwrap()).unwrap();
    s.wait_for("body[data-page=\"login\"]", WAIT).unwrap();
}

fn page_text(s: &Session) -> String {
    let body = s.wait_for("body", WAIT).unwrap();
    s.text(&body).unwrap()
}

#[test]
fn a_tenant_submits_watches_and_releases_the_seeds_request_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_USAGE_SAMPLE_MS", "500")],
    );
    let _a = Agent::start(Path::new(BIN), &cp, "node-a", "4xA100-80GB", dir.path());
    let _b = Agent::start(Path::new(BIN), &cp, "node-b", "2xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 2
    }));
    let alpha = cp.tenant("alpha");
    let bravo = cp.tenant("bravo");
    // bravo holds something too, so the operator has two tenants' work to see.
    let other = r#"{"task_id":"bravo_eval","task_type":"training","priority":"low",
        "resources":{"gpu":{"count":1,"memory_gb":40}},"duration":"00:30:00"}"#;
    assert_eq!(cp.api(&bravo).post("/v1/tasks", other).status, 201);

    let driver = Chromedriver::start().unwrap();
    let profile = tempfile::tempdir().unwrap();
    let s = driver.session(profile.path(), 1280, 800).unwrap();
    s.set_viewport(1280, 800).unwrap();
    let shots = Shots::new();
    let url = cp.url();

    // Login: the form, then a pasted token opens the overview.
    s.navigate(&format!("{url}/login")).unwrap();
    s.wait_for("#login-token", WAIT).unwrap();
    shots.take(&s, "login");
    log_in(&s, &url, &alpha);
    let who = s.text(&s.wait_for("#whoami", WAIT).unwrap()).unwrap();
    assert!(who.contains("alpha"), "{who}");

    // Submit: a GPU count of 0 is refused at its field.
    open(&s, "submit", "submit");
    for (path, value) in SEED {
        fill(&s, path, value);
    }
    fill(&s, "task_type", "training");
    fill(&s, "priority", "high");
    fill(&s, "resources.gpu.count", "0");
    s.click(&s.wait_for("#submit-task", WAIT).unwrap()).unwrap();
    let error = s
        .wait_text(&id("error-resources.gpu.count"), WAIT, |t| !t.is_empty())
        .unwrap();
    assert!(
        error.contains("count"),
        "the error names the field: {error}"
    );
    shots.take(&s, "submit");
    assert_eq!(cp.api(&alpha).get(&format!("/v1/tasks/{TASK}")).status, 404);

    // Fixed, a dry run says where it would go, then it is submitted.
    fill(&s, "resources.gpu.count", "2");
    s.click(&s.wait_for("#dry-run", WAIT).unwrap()).unwrap();
    let dry = s
        .wait_for(
            "#dry-run-result [data-placeable], #dry-run-result[data-placeable]",
            WAIT,
        )
        .unwrap();
    assert_eq!(
        s.attribute(&dry, "data-placeable").unwrap().as_deref(),
        Some("true")
    );
    let said = s.text(&dry).unwrap();
    let would = ["node-a", "node-b"]
        .into_iter()
        .find(|n| said.contains(&format!("start now on {n}")))
        .unwrap_or_else(|| panic!("the dry run names a node: {said}"));
    assert_eq!(cp.api(&alpha).get(&format!("/v1/tasks/{TASK}")).status, 404);
    fill(&s, "resources.gpu.count", "2");
    s.click(&s.wait_for("#submit-task", WAIT).unwrap()).unwrap();
    assert!(wait_until(WAIT, || {
        cp.api(&alpha).get(&format!("/v1/tasks/{TASK}")).data()["state"] == "running"
    }));
    // Where the dry run said: it drew nothing from the placer's seeded sequence.
    let task = cp.api(&alpha).get(&format!("/v1/tasks/{TASK}"));
    let node = task.data()["allocation"]["node"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(node, would, "{:#}", task.body);

    // The overview shows it: of the 6 GPUs, its 2 and bravo's half (40 of
    // 80 GB) allocated, and its events.
    open(&s, "overview", "overview");
    s.wait_text("#recent-events", WAIT, |t| t.contains(TASK))
        .unwrap();
    s.wait_text("tr[data-dim=\"gpus\"]", WAIT, |t| {
        t.starts_with("GPUs 6.0 2.5 ")
    })
    .unwrap();
    // Its curve: the usage history samples every 500 ms here.
    let curve = wait_until(WAIT, || {
        s.navigate(&format!("{url}/?range=1h")).is_ok()
            && s.find("#chart-gpus .empty").is_ok_and(|e| e.is_none())
    });
    assert!(curve, "the overview's GPU curve has no samples");
    shots.take(&s, "overview");

    // Its node's card: the GPU bars hold a slice with its id.
    open(&s, "nodes", "nodes");
    let slice = format!("[data-node=\"{node}\"] [data-gpu] [data-task-id=\"{TASK}\"]");
    let slices = s.find_all(&slice).unwrap();
    assert_eq!(slices.len(), 2, "one slice per GPU it holds");
    shots.take(&s, "nodes");

    // The task list, then its page; release it with the confirmation.
    open(&s, "tasks", "tasks");
    let row = s
        .wait_for(&format!("tr[data-task-id=\"{TASK}\"]"), WAIT)
        .unwrap();
    assert_eq!(
        s.attribute(&row, "data-state").unwrap().as_deref(),
        Some("running")
    );
    shots.take(&s, "tasks");
    let link = s
        .wait_for(&format!("tr[data-task-id=\"{TASK}\"] a.task-link"), WAIT)
        .unwrap();
    s.click(&link).unwrap();
    s.wait_text("#task-state", WAIT, |t| t.contains("running"))
        .unwrap();
    s.wait_for(&format!("#topology [data-task-id=\"{TASK}\"].this"), WAIT)
        .unwrap();
    shots.take(&s, "task");
    s.click(&s.wait_for("#release", WAIT).unwrap()).unwrap();
    s.click(&s.wait_for("#release-confirm", WAIT).unwrap())
        .unwrap();
    s.wait_text("#task-state", WAIT, |t| t.contains("released"))
        .unwrap();
    assert!(wait_until(WAIT, || {
        cp.api(&alpha).get(&format!("/v1/tasks/{TASK}")).data()["state"] == "released"
    }));

    // The tenant's own page, its models, its events.
    open(&s, "tenants", "tenants");
    s.wait_for("[data-tenant=\"alpha\"]", WAIT).unwrap();
    assert!(s.find("[data-tenant=\"bravo\"]").unwrap().is_none());
    shots.take(&s, "tenants");
    open(&s, "models", "models");
    shots.take(&s, "models");
    open(&s, "events", "events");
    s.wait_for("tr[data-seq]", WAIT).unwrap();
    assert!(page_text(&s).contains(TASK));
    assert!(
        !page_text(&s).contains("bravo_eval"),
        "another tenant's events"
    );
    shots.take(&s, "events");
    log_out(&s);

    // bravo cannot open alpha's task: the 404 page.
    log_in(&s, &url, &bravo);
    s.navigate(&format!("{url}/tasks/{TASK}")).unwrap();
    let msg = s.wait_for("#error-message", WAIT).unwrap();
    assert_eq!(
        s.attribute(&msg, "data-code").unwrap().as_deref(),
        Some("40400")
    );
    s.navigate(&format!("{url}/")).unwrap();
    log_out(&s);

    // The operator sees every tenant, and both tenants' tasks.
    log_in(&s, &url, OPERATOR_TOKEN);
    open(&s, "tenants", "tenants");
    s.wait_for("[data-tenant=\"alpha\"]", WAIT).unwrap();
    s.wait_for("[data-tenant=\"bravo\"]", WAIT).unwrap();
    open(&s, "tasks", "tasks");
    s.wait_for(&format!("tr[data-task-id=\"{TASK}\"]"), WAIT)
        .unwrap();
    s.wait_for("tr[data-task-id=\"bravo_eval\"]", WAIT).unwrap();
}

/// The portal's Content-Security-Policy fits what it serves: in a real
/// browser its script still refreshes the live region (a script from
/// itself, `fetch` of its own pages) and the memory bars still take their
/// widths from their `style` attributes.
#[test]
fn the_portal_script_and_its_bar_widths_work_under_its_content_security_policy() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _a = Agent::start(Path::new(BIN), &cp, "node-csp", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let api = cp.api(&cp.tenant("alpha"));
    let half = r#"{"task_id":"half","task_type":"training",
        "resources":{"gpu":{"count":1,"memory_gb":40}},"command":["sleep","120"]}"#;
    assert_eq!(api.post("/v1/tasks", half).status, 201);
    api.wait_task("half", 20, "running", |v| v["state"] == "running");

    let driver = Chromedriver::start().unwrap();
    let profile = tempfile::tempdir().unwrap();
    let s = driver.session(profile.path(), 1280, 800).unwrap();
    let url = cp.url();
    log_in(&s, &url, OPERATOR_TOKEN);
    open(&s, "nodes", "nodes");
    // portal.js marks the live region after each refresh (every 5 s).
    s.wait_for("#live[data-refreshed]", Duration::from_secs(20))
        .expect("the portal's script ran and fetched its page under the policy");
    let ratio = s
        .execute(
            "const e = document.querySelector('.membar .slice'); \
             return e ? e.offsetWidth / e.parentElement.clientWidth : -1;",
            vec![],
        )
        .unwrap();
    let ratio = ratio.as_f64().unwrap_or(-1.0);
    assert!(
        (0.45..=0.55).contains(&ratio),
        "40 of 80 GB is half the bar, not {ratio}: the style attribute was applied"
    );
}
