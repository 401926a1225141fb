//! A cap on the requests one client has in flight at once. A client is its
//! bearer token, or its address when it sends none: many slow requests from
//! one client then hold at most `max` connections' worth of work, and the
//! rest are refused at once (429) instead of piling up until the server runs
//! out of file descriptors. The node WebSocket (one
//! long-lived request per node, all nodes sharing the join token) and
//! `/healthz` are never capped: they are what must stay available.
use crate::error::ApiError;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, ResponseError};
use caldera_spec::codes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Paths a client is never refused on.
pub const EXEMPT: &[&str] = &["/healthz", "/v1/nodes/connect"];

/// In-flight requests per client.
pub struct ClientLimit {
    max: usize,
    in_flight: Mutex<HashMap<String, usize>>,
}

/// One admitted request; dropping it (answered, failed or cancelled) lets the
/// next one of the same client in.
struct Admitted {
    limit: Arc<ClientLimit>,
    client: String,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut m) = self.limit.in_flight.lock() {
            if let Some(n) = m.get_mut(&self.client) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    m.remove(&self.client);
                }
            }
        }
    }
}

impl ClientLimit {
    pub fn new(max: usize) -> Arc<ClientLimit> {
        Arc::new(ClientLimit {
            max,
            in_flight: Mutex::new(HashMap::new()),
        })
    }

    /// Admits one more request of `client`, or `None` when it has `max` already.
    fn admit(self: &Arc<Self>, client: String) -> Option<Admitted> {
        let mut m = self.in_flight.lock().ok()?;
        let n = m.entry(client.clone()).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Admitted {
            limit: self.clone(),
            client,
        })
    }
}

/// Who the client is: its bearer token, else its address.
fn client_of(req: &ServiceRequest) -> String {
    match crate::principal::bearer_token(req.headers()) {
        Some(t) => format!("token:{t}"),
        None => format!(
            "addr:{}",
            req.peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default()
        ),
    }
}

/// The middleware (`actix_web::middleware::from_fn`).
pub async fn cap(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    if EXEMPT.contains(&req.path()) {
        return next.call(req).await.map(|r| r.map_into_left_body());
    }
    let Some(limit) = req.app_data::<web::Data<Arc<ClientLimit>>>().cloned() else {
        return next.call(req).await.map(|r| r.map_into_left_body());
    };
    let Some(_admitted) = limit.admit(client_of(&req)) else {
        let refused = ApiError::new(
            &codes::TOO_MANY_REQUESTS,
            format!(
                "this client already has {} requests in flight (limits.max-requests-per-client); retry when one is answered",
                limit.max
            ),
        );
        return Ok(req
            .into_response(refused.error_response())
            .map_into_right_body());
    };
    next.call(req).await.map(|r| r.map_into_left_body())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_admitted_up_to_the_cap_and_again_after_one_ends() {
        let l = ClientLimit::new(2);
        let a = l.admit("token:a".into());
        let b = l.admit("token:a".into());
        assert!(a.is_some() && b.is_some());
        assert!(l.admit("token:a".into()).is_none(), "third of two");
        assert!(
            l.admit("token:b".into()).is_some(),
            "another client is not affected"
        );
        drop(a);
        assert!(l.admit("token:a".into()).is_some(), "one ended: room again");
    }

    #[test]
    fn a_client_with_nothing_in_flight_is_forgotten() {
        let l = ClientLimit::new(1);
        drop(l.admit("addr:127.0.0.1".into()));
        assert!(l.in_flight.lock().unwrap().is_empty());
    }
}
