//! The reference endpoint: protocol state ([`core`]) and its HTTP front ([`http`]).

pub(crate) mod core;
pub(crate) mod http;

pub use self::http::{RunningServer, Server, ServerConfig};
