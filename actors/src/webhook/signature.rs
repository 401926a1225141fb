//! The signature every delivery carries, so a receiver can tell a delivery
//! from Caldera from a forgery or a replay:
//! `Caldera-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
//! The key is the subscription's secret as it was shown (the 64 hex
//! characters, as bytes); the timestamp is inside the signed text, so a
//! receiver that refuses old timestamps refuses replays (Stripe's scheme).
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `Caldera-Signature` header value for `body` sent at `t` (unix seconds).
pub fn signature_header(secret: &str, t: u64, body: &[u8]) -> String {
    format!("t={t},v1={}", sign(secret, t, body))
}

/// Hex HMAC-SHA256 of `"<t>.<body>"` under `secret`.
pub fn sign(secret: &str, t: u64, body: &[u8]) -> String {
    hmac_hex(secret.as_bytes(), &[t.to_string().as_bytes(), b".", body])
}

/// Hex HMAC-SHA256 under `key` of the concatenation of `parts`.
fn hmac_hex(key: &[u8], parts: &[&[u8]]) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    for p in parts {
        mac.update(p);
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2 (key "Jefe"): the HMAC itself is the standard one.
    #[test]
    fn the_mac_is_rfc_4231_hmac_sha256() {
        assert_eq!(
            hmac_hex(b"Jefe", &[b"what do ya want for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// What a receiver computes: HMAC over "<t>.<body>" in one piece.
    #[test]
    fn the_header_signs_the_timestamp_dot_body() {
        let body = br#"{"id":7}"#;
        let h = signature_header("s3cret", 1700000000, body);
        let want = hmac_hex(b"s3cret", &[b"1700000000.{\"id\":7}"]);
        assert_eq!(h, format!("t=1700000000,v1={want}"));
        // Any change of body, time or secret changes it.
        assert_ne!(
            sign("s3cret", 1700000001, body),
            sign("s3cret", 1700000000, body)
        );
        assert_ne!(
            sign("s3cret", 1700000000, br#"{"id":8}"#),
            sign("s3cret", 1700000000, body)
        );
        assert_ne!(
            sign("other", 1700000000, body),
            sign("s3cret", 1700000000, body)
        );
    }
}
