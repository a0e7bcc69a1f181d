//! The gateway's own header names: forwarding between processes and who served an answer.

/// Marks a request one process forwarded to another. A process never forwards a request that
/// carries it; a client may set it to ask one process about what it holds itself.
pub const FORWARDED_HEADER: &str = "x-turnstile-forwarded";

/// On a 421 `owned_elsewhere` answer: the address of the process that owns the session.
pub const OWNER_HEADER: &str = "x-turnstile-owner";

/// On every answer to a session-scoped request of a gateway that forwards: the address of the
/// process that served it.
pub const SERVED_BY_HEADER: &str = "x-turnstile-served-by";
