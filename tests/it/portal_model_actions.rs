//! The portal's model-version actions against the real binary and a real
//! agent: a service's task page offers the swap form and
//! its POST goes through the API's own rules (CSRF first, then the
//! 1-replica rule, then an accepted swap shown as progress on the task page
//! and the models page); the models page
//! offers the operator — and only the operator — the retire form, whose POST
//! records the retirement the API shows.
use caldera_chaos_tests::models::{model_service, one_core, submit, wait_running};
use caldera_chaos_tests::portal::{text, Browser};
use caldera_chaos_tests::weights::generate;
use caldera_chaos_tests::{cluster, AgentSpec, OPERATOR_TOKEN};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn swap_and_retire_are_offered_and_go_through_the_apis_rules() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [AgentSpec::with_cache("node-0", "2xA100-80GB", "1")];
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), &[], &specs);
    let op = cp.operator();
    for (v, seed) in [("v1", 1), ("v2", 2), ("v3", 3)] {
        let w = generate(&dir.path().join(format!("nfs/m-{v}.bin")), 100_000, seed).unwrap();
        let r = op.register_model("m", v, &w.spec(&w.file_uri()));
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    let token = cp.tenant("alpha");
    let api = cp.api(&token);
    submit(&api, &model_service("svc", "m:v1", 1, one_core()));
    wait_running(&api, "svc.r0", 60);

    let mut alpha = Browser::logged_in(&cp.addr, &token);
    let page = alpha.get("/tasks/svc");
    assert_eq!(page.status, 200, "{}", text(&page));
    for id in ["id=\"swap\"", "id=\"swap-model\"", "id=\"swap-confirm\""] {
        assert!(text(&page).contains(id), "the service offers {id}");
    }
    let csrf = alpha.csrf("/tasks/svc");

    // No CSRF token: refused before anything acts.
    let r = alpha.post_form("/tasks/svc/swap?tenant=alpha", &[("model", "m:v2")]);
    assert_eq!(r.status, 403, "{}", text(&r));
    // One replica, no downtime allowed, no surge: the API's rule refuses it.
    let r = alpha.post_form(
        "/tasks/svc/swap?tenant=alpha",
        &[("csrf", &csrf), ("model", "m:v2")],
    );
    assert_eq!(r.status, 409, "{}", text(&r));
    assert!(text(&r).contains("data-code=\"40904\""), "{}", text(&r));
    // A model not written name:version names the field.
    let r = alpha.post_form(
        "/tasks/svc/swap?tenant=alpha",
        &[("csrf", &csrf), ("model", "no-version")],
    );
    assert_eq!(r.status, 400, "{}", text(&r));
    assert!(text(&r).contains("model"), "{}", text(&r));
    let svc = api.get("/v1/tasks/svc");
    assert!(
        svc.body["data"]["swap"].is_null(),
        "nothing started: {:#}",
        svc.body
    );

    // With downtime allowed the swap is recorded and the page shows its progress.
    let r = alpha.post_form(
        "/tasks/svc/swap?tenant=alpha",
        &[
            ("csrf", &csrf),
            ("model", "m:v2"),
            ("allow_downtime", "true"),
        ],
    );
    assert_eq!(r.status, 303, "{}", text(&r));
    let svc = api.get("/v1/tasks/svc");
    assert_eq!(svc.body["data"]["swap"]["to"], "m:v2", "{:#}", svc.body);
    let page = alpha.get("/tasks/svc");
    assert!(
        text(&page).contains("id=\"swap-progress\""),
        "{}",
        text(&page)
    );
    assert!(
        text(&page).contains("svc.r0"),
        "the replica's step is listed"
    );

    // Retire: a tenant's session gets no form and its POST is refused.
    let models = alpha.get("/models");
    assert!(
        !text(&models).contains("retire-confirm"),
        "{}",
        text(&models)
    );
    let csrf_a = alpha.csrf("/models");
    let r = alpha.post_form("/models/m/versions/v3/retire", &[("csrf", &csrf_a)]);
    assert_eq!(r.status, 403, "{}", text(&r));
    assert_eq!(op.model_version("m", "v3")["state"], "registered");

    // The operator retires the unused v3: recorded, then retired.
    let mut opb = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    let models = opb.get("/models");
    assert!(
        text(&models).contains("retire-confirm"),
        "{}",
        text(&models)
    );
    let csrf_o = opb.csrf("/models");
    let r = opb.post_form("/models/m/versions/v3/retire", &[("csrf", &csrf_o)]);
    assert_eq!(r.status, 303, "{}", text(&r));
    assert!(caldera_chaos_tests::wait_until(
        std::time::Duration::from_secs(20),
        || op.model_version("m", "v3")["state"] == "retired"
    ));
    let models = opb.get("/models");
    assert!(
        text(&models).contains("retire asked by operator"),
        "{}",
        text(&models)
    );
}
