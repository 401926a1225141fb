//! What the webhook routes answer: the views of `caldera_spec::views`,
//! which the CLI reads and `/openapi.json` documents.
pub use caldera_spec::views::{
    DeliveryPage, DeliveryView, WebhookDeleted, WebhookList, WebhookView,
};
