//! Domain vocabulary shared by the API layers and the store: enums of the wire format, roles and
//! permissions, durations and input validation.

pub mod duration;
pub mod enums;
pub mod roles;
pub mod settings;
pub mod validate;
