//! The reference endpoint: protocol state ([`core`]) and its HTTP front ([`http`]).

pub mod core;
pub mod http;

pub use self::http::{RunningServer, Server, ServerConfig};
