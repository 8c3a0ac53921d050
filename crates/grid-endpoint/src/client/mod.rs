//! Clients: of the `grid-endpoint/1` protocol ([`endpoint`]) and of stock
//! OpenAI-compatible servers in the direct mode ([`direct`]), over a shared HTTP layer
//! ([`http`]).

pub(crate) mod direct;
pub mod endpoint;
pub(crate) mod http;
pub mod openai;

pub use direct::{ConstraintStyle, DirectClient, DirectConfig, Finish, GreedyOutput};
pub use endpoint::{ClientConfig, ClientStats, EndpointClient, Mask, Sampled, StepInput};
pub use http::{ApiKey, HttpConfig};
