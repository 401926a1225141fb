//! `[portal]`: the web portal's sessions and login throttle.
use super::key::section;
use super::ConfigError;

section! {
    /// How long logins last and how often they may be tried.
    pub struct PortalSection = "portal" {
        /// How long a portal login lasts, ms (sessions are held in memory: a
        /// restart ends them; 12 h by default).
        session_ttl_ms: u64 = 43_200_000, was "portal-session-ttl-ms";
        /// Most portal sessions one principal (the operator, or one tenant)
        /// holds at once; a login past it ends that principal's own oldest
        /// session, never another's.
        sessions_per_principal: usize = 16, was "portal-sessions-per-principal";
        /// Portal logins one principal may make a minute, and failed logins
        /// one client address may make a minute; more are answered 429.
        logins_per_minute: u32 = 20, was "portal-logins-per-minute";
    }
}

impl PortalSection {
    /// Checks values that would make the portal misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.session_ttl_ms < 1000 {
            return Err(ConfigError::new(
                "portal.session-ttl-ms",
                "must be at least 1000",
            ));
        }
        if self.sessions_per_principal == 0 {
            return Err(ConfigError::new(
                "portal.sessions-per-principal",
                "must be greater than 0",
            ));
        }
        if self.logins_per_minute == 0 {
            return Err(ConfigError::new(
                "portal.logins-per-minute",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
}
