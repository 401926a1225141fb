//! The operations `/openapi.json` documents: every handler the route table
//! serves, listed by its `#[utoipa::path]` annotation. The document names
//! the routes; the routes name only the document's own handlers.
use utoipa::OpenApi;

/// The operations of `/openapi.json`: the same handlers as the route table
/// ([`crate::routes::registered`]; `registered_routes_are_exactly_the_documented_ones`
/// fails when the two lists differ).
#[derive(OpenApi)]
#[openapi(paths(
    crate::routes::health::healthz,
    crate::routes::health::metrics,
    crate::openapi::spec,
    crate::openapi::docs::page,
    crate::openapi::docs::asset,
    crate::routes::tasks::list,
    crate::routes::tasks::submit,
    crate::routes::tasks::get,
    crate::routes::tasks::release,
    crate::routes::tasks::logs,
    crate::routes::tasks::scale,
    crate::routes::swap::swap,
    crate::routes::endpoints::endpoints,
    crate::ws::connect,
    crate::routes::nodes::list,
    crate::routes::nodes::get,
    crate::routes::nodes::revoke,
    crate::routes::nodes::rotate_secret,
    crate::routes::nodes::cordon,
    crate::routes::nodes::drain,
    crate::routes::nodes::uncordon,
    crate::routes::images::prepull,
    crate::routes::utilization::get,
    crate::routes::tenants::list,
    crate::routes::tenants::create,
    crate::routes::tenants::get,
    crate::routes::tenants::set_quota,
    crate::routes::registry_credentials::set,
    crate::routes::registry_credentials::list,
    crate::routes::registry_credentials::delete,
    crate::routes::models::list,
    crate::routes::models::register,
    crate::routes::models::get,
    crate::routes::models::version,
    crate::routes::models::prewarm,
    crate::routes::models::pin,
    crate::routes::models::deprecate,
    crate::routes::model_retire::retire,
    crate::routes::events::list,
    crate::routes::whoami::get,
    crate::routes::stats::estimates,
    crate::routes::nodes::allocations,
    crate::routes::history::tenant,
    crate::routes::cost::get,
    crate::routes::cost::total,
    crate::routes::history::pool,
    crate::routes::webhooks::list,
    crate::routes::webhooks::create,
    crate::routes::webhooks::get,
    crate::routes::webhooks::delete,
    crate::routes::webhooks::deliveries,
    crate::portal::login::page,
    crate::portal::login::login,
    crate::portal::login::logout,
    crate::portal::assets::asset,
    crate::portal::overview::page_handler,
    crate::portal::events::page_handler,
    crate::portal::submit::page_handler,
    crate::portal::submit::submit,
    crate::portal::submit::dry_run_handler,
    crate::portal::tasks::page_handler,
    crate::portal::task_page::page_handler,
    crate::portal::task_page::log_handler,
    crate::portal::task_page::release,
    crate::portal::task_page::scale,
    crate::portal::nodes::page_handler,
    crate::portal::nodes::cordon,
    crate::portal::tenants::page_handler,
    crate::portal::tenants::cost_csv,
    crate::portal::models::page_handler,
    crate::portal::model_actions::swap,
    crate::portal::model_actions::retire,
))]
pub struct ApiPaths;

#[cfg(feature = "failpoints")]
#[derive(OpenApi)]
#[openapi(paths(
    crate::routes::failpoints::get,
    crate::routes::failpoints::clear,
    crate::routes::failpoints::arm,
))]
struct FailpointPaths;

/// The test-only routes' operations, in a build with them.
pub fn failpoints_doc() -> Option<utoipa::openapi::OpenApi> {
    #[cfg(feature = "failpoints")]
    return Some(FailpointPaths::openapi());
    #[cfg(not(feature = "failpoints"))]
    None
}
