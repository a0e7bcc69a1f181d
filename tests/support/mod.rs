//! Shared helpers for the integration tests. Each test file includes this with `mod support;`
//! and uses what it needs.

#![allow(dead_code)]

pub mod faulty;
pub mod harness;
#[cfg(feature = "redis")]
pub mod redis_server;
pub mod stores;
