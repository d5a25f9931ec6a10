//! One integration-test binary: every test starts the real server on a random port and talks
//! HTTP to it. Storage runs on `SQLite`, or on `PostgreSQL` with `GATEHOUSE_TEST_BACKEND=postgres`
//! and `GATEHOUSE_TEST_POSTGRES=postgres://…` (a fresh database per test, dropped after).

// Test code states its expectations with `expect`: a failed one is the test failing.
#![allow(clippy::expect_used, clippy::needless_pass_by_value)]
// A test reads as one story from setup to the last assertion; the 100-line bound is for the
// library.
#![allow(clippy::too_many_lines)]

#[allow(dead_code)]
mod helpers;

mod audit;
mod backup;
mod cache;
mod cancelled_writes;
mod cimd;
mod cimd_budget;
// The harness's https host needs the fetcher's debug-build trust of it.
#[cfg(debug_assertions)]
mod cimd_tls;
mod cli_admin;
mod cli_audit;
mod client_errors;
mod config_startup;
mod console;
mod console_confirm;
mod console_consent;
mod console_first_run;
mod credential_limits;
#[allow(dead_code)]
mod delay_proxy;
mod device;
mod display_text;
mod doctor;
mod dpop;
mod failover;
mod fallbacks;
mod grants;
mod hostile;
mod idp;
mod invitations;
mod keys;
mod keys_page;
mod lanes;
mod limits;
mod listing;
mod lockout;
mod malformed;
mod mcp;
mod mcp_interop;
mod metrics;
mod oauth;
#[allow(dead_code)]
mod oauth_helpers;
mod paging;
mod passkeys;
mod personal_upstreams;
mod private_key_jwt;
mod project_choice;
mod prompts;
mod proxies;
mod pruning;
mod quota_reach;
mod quotas;
mod recovery;
mod request_log;
mod resources;
mod second_factor;
mod server_key;
mod service;
mod setup_link;
mod signin;
mod slow_bodies;
mod stdio;
mod store_contract;
mod surface;
mod timeline;
mod token;
mod upgrades;
mod upstream_connections;
mod upstreams;
mod urls;
mod workload;
