//! PEM encoding of DER documents (key files handed to machine users and applications).

pub fn encode(label: &str, der: &[u8]) -> String {
    ::pem::encode_config(
        &::pem::Pem::new(label, der.to_vec()),
        ::pem::EncodeConfig::new().set_line_ending(::pem::LineEnding::LF),
    )
}

/// The DER contents of the first PEM block, with its label.
pub fn decode(text: &str) -> Option<(String, Vec<u8>)> {
    let p = ::pem::parse(text).ok()?;
    Some((p.tag().to_string(), p.into_contents()))
}
