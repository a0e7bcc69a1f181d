//! A turn admitted apart from the wait for its outcome: the caller that admitted it may stop
//! waiting, or hand the wait to another task, and the turn runs on either way.

use tokio::sync::oneshot;

use super::Runtime;
use crate::call::{CallOptions, Outcome};
use crate::error::{Error, Result};
use crate::key::SessionKey;
use crate::session::SessionMsg;

/// A turn the session took in (see [`Runtime::admit`]), and the wait for its outcome.
pub(crate) struct Admitted {
    key: SessionKey,
    reply: oneshot::Receiver<Result<Outcome>>,
}

impl Admitted {
    /// The turn's outcome, once it is durable.
    pub(crate) async fn outcome(self) -> Result<Outcome> {
        self.reply
            .await
            .map_err(|_| Error::SessionFailed { key: self.key })?
    }
}

impl Runtime {
    /// Admits a turn as [`Runtime::call_with`] does, and gives the wait for its outcome apart:
    /// a caller that stops waiting leaves the turn running, and may hand the wait on.
    pub(crate) async fn admit(
        &self,
        key: &SessionKey,
        input: impl Into<String>,
        options: CallOptions,
    ) -> Result<Admitted> {
        let (request, reply) = self.request(input.into(), &options, None, false)?;
        self.registry()
            .submit(key, SessionMsg::Turn(request))
            .await?;
        Ok(Admitted {
            key: key.clone(),
            reply,
        })
    }
}
