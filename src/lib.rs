#![doc = include_str!("../README.md")]
//!
//! # Layout
//!
//! - [`key`](SessionKey): session keys and their validation.
//! - [`state`]: the pure state model — events, scopes, the fold, schema versions.
//! - [`store`]: the [`Store`] trait, the conformance suite, and the stores.

mod key;
pub mod state;
pub mod store;

pub use key::{validate_id, KeyError, KeyPart, SessionKey, MAX_ID_BYTES};
pub use store::{MemoryStore, Store, StoreError};
