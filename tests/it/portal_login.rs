//! The portal's login, session cookie, CSRF and logout, against the real
//! binary over HTTP.
use caldera_chaos_tests::portal::{text, Browser};
use caldera_chaos_tests::{ControlPlane, OPERATOR_TOKEN};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn login_sets_a_strict_http_only_cookie_and_logout_ends_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let token = cp.tenant("alpha");

    // Without a session every page sends the browser to the login.
    let mut b = Browser::new(&cp.addr);
    let r = b.get("/");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login"));

    // A wrong token: the form again, saying so; no session.
    let r = b.login("not-a-token");
    assert_eq!(r.status, 401, "{}", text(&r));
    assert!(text(&r).contains("id=\"login-error\""), "{}", text(&r));
    assert!(!b.cookies.contains_key("caldera_session"));

    let r = b.login(&token);
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(r.header("location"), Some("/"));
    let set: Vec<&str> = r
        .headers
        .iter()
        .filter(|(n, v)| n == "set-cookie" && v.starts_with("caldera_session="))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(set.len(), 1, "{:?}", r.headers);
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set[0].contains(attr), "{attr} missing: {}", set[0]);
    }
    let id = b.cookies["caldera_session"].clone();
    assert!(id.len() >= 32, "a 128-bit id at least: {id}");

    let page = b.get("/");
    assert_eq!(page.status, 200, "{}", text(&page));
    assert!(text(&page).contains("tenant alpha"));
    let timing = page.header("server-timing").unwrap_or_default();
    assert!(timing.starts_with("render;dur="), "{timing}");

    // Logout without or with a wrong CSRF token is refused and changes nothing.
    for bad in [vec![], vec![("csrf", "0000")]] {
        let r = b.post_form("/logout", &bad);
        assert_eq!(r.status, 403, "{}", text(&r));
        assert!(text(&r).contains("40301"), "{}", text(&r));
        assert_eq!(b.get("/").status, 200, "the session still works");
    }
    let csrf = b.csrf("/");
    let r = b.post_form("/logout", &[("csrf", &csrf)]);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login"));

    // The old cookie, sent again, no longer opens anything.
    let mut old = Browser::new(&cp.addr);
    old.cookies.insert("caldera_session".into(), id);
    assert_eq!(old.get("/").status, 303);
    let frag = old.get("/?fragment=live");
    assert_eq!(
        frag.status, 401,
        "a live fragment answers 401 for the script"
    );
    assert!(text(&frag).contains("40102"));
}

#[test]
fn a_login_form_without_its_page_cookie_and_a_join_token_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // A form posted from elsewhere: no cookie from the login page.
    let mut b = Browser::new(&cp.addr);
    let r = b.post_form("/login", &[("login_nonce", "x"), ("token", OPERATOR_TOKEN)]);
    assert_eq!(r.status, 403, "{}", text(&r));
    assert!(text(&r).contains("40302"));
    assert!(!b.cookies.contains_key("caldera_session"));
    // The join token is valid for nodes only.
    let r = b.login(caldera_chaos_tests::JOIN_TOKEN);
    assert_eq!(r.status, 401);
    // The operator's token logs in as the operator.
    let mut op = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    assert!(text(&op.get("/")).contains("operator"));
}

#[test]
fn a_session_ends_after_portal_session_ttl_ms() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_PORTAL_SESSION_TTL_MS", "1000")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let mut b = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    assert_eq!(b.get("/").status, 200);
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let r = b.get("/");
    assert_eq!(r.status, 303, "the session expired: {}", text(&r));
    assert_eq!(r.header("location"), Some("/login"));
}

/// The headers every portal answer carries, whatever its status.
fn assert_browser_headers(r: &caldera_chaos_tests::http::Reply, what: &str) {
    let csp = r.header("content-security-policy").unwrap_or_default();
    for directive in [
        "script-src 'self'",
        "frame-ancestors 'none'",
        "default-src 'none'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: CSP lacks {directive}: {csp:?}"
        );
    }
    assert!(!csp.contains("unsafe-eval"), "{what}: {csp}");
    assert_eq!(r.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(
        r.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
}

#[test]
fn every_portal_answer_carries_the_browser_security_headers_and_hsts_only_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let mut b = Browser::new(&cp.addr);
    let login = b.get("/login");
    assert_browser_headers(&login, "login page");
    assert_browser_headers(&b.get("/"), "redirect to the login");
    assert_browser_headers(&b.login("not-a-token"), "refused login");
    let mut b = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    for path in [
        "/",
        "/tasks",
        "/nodes",
        "/tasks/none",
        "/portal/assets/portal.js",
    ] {
        let r = b.get(path);
        assert_browser_headers(&r, path);
        assert!(
            r.header("strict-transport-security").is_none(),
            "{path} over http"
        );
    }
    // The portal's page loads its script from itself and has no inline one,
    // which the policy would block.
    let page = text(&b.get("/")).to_string();
    assert!(
        page.contains("<script src=\"/portal/assets/portal.js\""),
        "{page}"
    );
    assert!(!page.contains("<script>"), "an inline script: {page}");
    // Behind a TLS-terminating proxy (it says so): HSTS too.
    let api = cp.operator();
    let r = api.send("GET", "/login", None, "X-Forwarded-Proto: https\r\n");
    assert_browser_headers(&r, "login over https");
    assert_eq!(
        r.header("strict-transport-security"),
        Some("max-age=31536000")
    );
    // API answers are not framed or sniffed either.
    let r = api.get("/v1/tasks");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
}

#[test]
fn one_tenants_logins_end_only_its_own_oldest_sessions_never_the_operators() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_PORTAL_SESSIONS_PER_PRINCIPAL", "3")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let token = cp.tenant("alpha");
    let mut operator = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    let mut tenant: Vec<Browser> = (0..8)
        .map(|_| Browser::logged_in(&cp.addr, &token))
        .collect();
    assert_eq!(
        operator.get("/").status,
        200,
        "the operator's session lives on"
    );
    let live: Vec<u16> = tenant.iter_mut().map(|b| b.get("/").status).collect();
    assert_eq!(
        live,
        vec![303, 303, 303, 303, 303, 200, 200, 200],
        "the tenant keeps its newest 3 sessions"
    );
}

#[test]
fn logins_past_the_rate_are_answered_429_saying_when_and_other_principals_still_log_in() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_PORTAL_LOGINS_PER_MINUTE", "3")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let token = cp.tenant("alpha");
    for _ in 0..3 {
        Browser::logged_in(&cp.addr, &token);
    }
    let mut b = Browser::new(&cp.addr);
    let r = b.login(&token);
    assert_eq!(r.status, 429, "{}", text(&r));
    assert_eq!(r.header("x-caldera-code"), Some("42930"));
    let wait: u64 = r.header("retry-after").unwrap_or("0").parse().unwrap_or(0);
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert!(text(&r).contains("id=\"login-error\""), "{}", text(&r));
    assert!(
        text(&r).contains("logged in 3 times in the last minute"),
        "{}",
        text(&r)
    );
    assert!(
        !b.cookies.contains_key("caldera_session"),
        "no session opened"
    );
    // Another principal is not held back by this one's logins.
    let mut op = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);
    assert_eq!(op.get("/").status, 200);
    // Failed logins are counted per address: past 3 they are answered 429,
    // and a valid token from the same address still logs in.
    for _ in 0..3 {
        assert_eq!(Browser::new(&cp.addr).login("not-a-token").status, 401);
    }
    let r = Browser::new(&cp.addr).login("not-a-token");
    assert_eq!(r.status, 429, "{}", text(&r));
    assert!(
        text(&r).contains("too many failed logins from this address"),
        "{}",
        text(&r)
    );
    let mut op = Browser::new(&cp.addr);
    assert_eq!(
        op.login(OPERATOR_TOKEN).status,
        303,
        "not held back by the failures"
    );
    assert_eq!(op.get("/").status, 200);
}
