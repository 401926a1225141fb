//! The endpoint lists last answered per service, and their revisions (see
//! [`crate::api::endpoints`] for how a revision is numbered).
use caldera_spec::views::EndpointView;
use std::collections::HashMap;
use std::sync::Mutex;

/// The last list seen per service (by key) and its revision.
#[derive(Default)]
pub struct EndpointRevisions(Mutex<HashMap<String, (Vec<EndpointView>, u64)>>);

impl EndpointRevisions {
    /// The revision of `list` for `service`: the last one if the list is
    /// unchanged, else a new, larger one (see the module doc).
    pub(crate) fn observe(&self, service: &str, list: &[EndpointView]) -> u64 {
        let now_ms = caldera_actors::clock::now_ms();
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get_mut(service) {
            Some((last, rev)) if last.as_slice() == list => *rev,
            Some((last, rev)) => {
                *rev = (*rev + 1).max(now_ms);
                *last = list.to_vec();
                *rev
            }
            None => {
                seen.insert(service.to_string(), (list.to_vec(), now_ms));
                now_ms
            }
        }
    }
}
