//! Pure domain rules of Gatehouse: no I/O, no async, no framework types.

pub mod account;
pub mod api_key;
pub mod audit;
pub mod authorization;
pub mod cimd;
pub mod client;
pub mod client_assertion;
pub mod device;
pub mod dpop;
pub mod forwarded;
pub mod grant;
pub mod idp;
pub mod loopback;
pub mod notes;
pub mod pkce;
pub mod principal;
pub mod quota;
pub mod redirect_uri;
pub mod refresh;
pub mod registry;
pub mod resource;
pub mod scope;
pub mod secret;
pub mod server_key;
pub mod successor;
pub mod text;
pub mod throttle;
pub mod upstream;

#[cfg(test)]
mod properties;
