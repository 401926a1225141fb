//! Hot swap, as the gateway calls it: `POST /v1/tasks/{service}/model`.
use super::ControlPlane;
use crate::errors::{ActorError, Result};
use crate::protocol::service::SwapModel;
use caldera_spec::{ModelRef, SwapAnswer};

/// `{"model": "name:v4", "allow_downtime": false, "max_surge": 0}`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapRequest {
    pub model: ModelRef,
    pub allow_downtime: bool,
    pub max_surge: u32,
}

/// Parses a swap body; unknown fields are refused, each named.
pub fn parse_swap(body: &[u8]) -> Result<SwapRequest> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        model: String,
        #[serde(default)]
        allow_downtime: bool,
        #[serde(default)]
        max_surge: u32,
    }
    let b: Body = caldera_spec::validate::parse_json(body)?;
    Ok(SwapRequest {
        model: ModelRef::parse(&b.model, "model")?,
        allow_downtime: b.allow_downtime,
        max_surge: b.max_surge,
    })
}

impl ControlPlane {
    /// Asks service `id` (a task key) to swap as `req` says, for `by`.
    pub async fn swap_model(&self, id: &str, req: SwapRequest, by: String) -> Result<SwapAnswer> {
        let Some(a) = self.sh.registry.service(id) else {
            if self.sh.registry.task(id).is_some() {
                return Err(ActorError::Conflict(format!(
                    "{} is not an inference service; only a service's model is swapped",
                    caldera_spec::local_id(id)
                )));
            }
            return Err(ActorError::Conflict(
                "the service has ended; only a live service is swapped".to_string(),
            ));
        };
        a.send(SwapModel {
            to: req.model,
            requested_by: by,
            allow_downtime: req.allow_downtime,
            max_surge: req.max_surge,
        })
        .await?
    }
}

#[cfg(test)]
mod tests {
    use super::parse_swap;

    #[test]
    fn a_swap_body_names_a_version_and_each_bad_field() {
        let ok = parse_swap(br#"{"model":"llama:v4","max_surge":1}"#).unwrap();
        assert_eq!(ok.model.to_string(), "llama:v4");
        assert_eq!((ok.allow_downtime, ok.max_surge), (false, 1));
        let rows: &[(&str, &str)] = &[
            (r#"{"model":"llama:v4","surge":1}"#, "surge"),
            (r#"{"model":"llama"}"#, "model"),
            (r#"{}"#, "model"),
            (
                r#"{"model":"llama:v4","allow_downtime":"yes"}"#,
                "allow_downtime",
            ),
            (r#"{"model":"llama:v4","max_surge":-1}"#, "max_surge"),
        ];
        for (body, field) in rows {
            let e = parse_swap(body.as_bytes()).unwrap_err();
            assert_eq!(e.field(), Some(*field), "{body}: {e}");
        }
    }
}
