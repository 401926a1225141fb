//! The allocation history and audit trail as the API shows it
//! (`GET /v1/events`).
use crate::Event;
use serde::{Deserialize, Serialize};

/// An event as the API shows it: its time also in RFC 3339, its task by
/// the tenant's own id (the tenant is its own field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    /// RFC 3339 of `at_ms`.
    pub at: String,
    #[serde(flatten)]
    pub event: Event,
}

/// `GET /v1/events`: a page of events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventPage {
    pub events: Vec<EventView>,
    /// The `seq` to pass as `cursor` for the next page; null: no more.
    pub next_cursor: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    #[test]
    fn an_event_reads_back_with_its_fields_beside_its_time() {
        let mut event = Event::new(1_000, EventKind::NodeJoined, "node-1 joined");
        event.seq = 7;
        event.node = Some("node-1".into());
        let page = EventPage {
            events: vec![EventView {
                at: "1970-01-01T00:00:01Z".into(),
                event,
            }],
            next_cursor: Some(7),
        };
        let wire = serde_json::to_value(&page).expect("serializes");
        assert_eq!(wire["events"][0]["kind"], "node_joined");
        assert_eq!(wire["events"][0]["at"], "1970-01-01T00:00:01Z");
        assert_eq!(serde_json::from_value::<EventPage>(wire).ok(), Some(page));
    }
}
