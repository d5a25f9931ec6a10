//! Gatehouse: an OAuth 2.1 authorization server and an MCP resource server in one binary.
//!
//! Layers (dependencies point one way):
//! `main → app → {oauth, mcp, web} → {store, domain}`; `store → domain`; `domain` imports nothing
//! from the crate. See `docs/architecture.md`.

pub mod app;
pub mod cli;
pub mod client_addr;
pub mod clients;
pub mod config;
pub mod connections;
pub mod cors;
pub mod credentials;
pub mod doctor;
pub mod domain;
pub mod error;
pub mod events;
pub mod idp;
pub mod lanes;
pub mod mail;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod passkeys;
pub mod password;
pub mod remote;
pub mod request_body;
pub mod second_factor;
pub mod server;
pub mod signin;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod upkeep;
pub mod upstream_oauth;
pub mod web;
