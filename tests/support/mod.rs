//! Shared helpers for the integration tests. Each test file includes this with `mod support;`
//! and uses what it needs.

#![allow(dead_code)]

pub mod artifacts;
#[cfg(feature = "http")]
pub mod browser;
#[cfg(feature = "http")]
pub mod channels;
pub mod cli;
#[cfg(all(feature = "http", feature = "redis"))]
pub mod cluster;
#[cfg(feature = "openai")]
pub mod fake_openai;
#[cfg(feature = "http")]
pub mod gateways;
pub mod harness;
pub mod http;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod memory;
#[cfg(feature = "http")]
pub mod openai_sdk;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "postgres")]
pub mod postgres_server;
#[cfg(feature = "redis")]
pub mod redis_cluster;
#[cfg(feature = "redis")]
pub mod redis_replica;
#[cfg(feature = "redis")]
pub mod redis_server;
#[cfg(feature = "http")]
pub mod serve;
pub mod stores;
