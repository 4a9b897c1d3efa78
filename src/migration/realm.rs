//! Reads a Keycloak realm export user by user, without holding the realm in memory: the
//! realm's `users` array is deserialized one element at a time and each user handed to a
//! callback; every other part of the realm (clients, roles, keys, ...) is skipped unparsed.
//!
//! A file holds one realm object or an array of realms (Keycloak's test suite writes those).
//! Which realm's users are read: the one named by `--realm-name`, else the first. Keycloak
//! writes `realm` before `users`; when a file has them the other way round and a name is
//! wanted, that realm's users are held until its name is known.

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use indicatif::ProgressBar;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Error;
use super::keycloak::KcUser;

pub(crate) type OnUser<'f> = dyn FnMut(KcUser) -> Result<(), Error> + 'f;

/// What one file held.
#[derive(Debug, Default)]
pub(crate) struct FileReport {
    /// The names of the realms met, in order ("" for a realm without a name).
    pub realms: Vec<String>,
    /// Whether the wanted realm (or, without a name, the first) was among them.
    pub matched: bool,
    /// Whether the file was an array of realms.
    pub array: bool,
}

/// Reads `path`, calling `on_user` for each user of the selected realm. An error from
/// `on_user` stops the reading and is returned as it is.
pub(crate) fn read_file(
    path: &Path,
    want: Option<&str>,
    on_user: &mut OnUser<'_>,
    pb: &ProgressBar,
) -> Result<FileReport, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader = BufReader::with_capacity(1 << 16, pb.wrap_read(file));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut state = State { want, on_user, report: FileReport::default(), failed: None };
    let result = Top(&mut state).deserialize(&mut de).and_then(|array| de.end().map(|()| array));
    if let Some(e) = state.failed.take() {
        return Err(e);
    }
    match result {
        Ok(array) => {
            state.report.array = array;
            Ok(state.report)
        }
        Err(e) if e.is_io() => Err(Error::io(path, std::io::Error::other(e.to_string()))),
        Err(e) => Err(Error::Json { path: path.to_path_buf(), msg: e.to_string() }),
    }
}

struct State<'s, 'f> {
    want: Option<&'s str>,
    on_user: &'s mut OnUser<'f>,
    report: FileReport,
    /// The callback's error, kept while serde unwinds with a placeholder.
    failed: Option<Error>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Process,
    Hold,
    Ignore,
}

impl State<'_, '_> {
    fn decide(&self, index: usize, name: Option<&str>) -> Decision {
        match (self.want, name) {
            (Some(w), Some(n)) if w == n => Decision::Process,
            (Some(_), Some(_)) => Decision::Ignore,
            (Some(_), None) => Decision::Hold,
            (None, _) if index == 0 => Decision::Process,
            (None, _) => Decision::Ignore,
        }
    }

    fn feed<E: de::Error>(&mut self, user: KcUser) -> Result<(), E> {
        if self.failed.is_some() {
            return Err(E::custom("stopped"));
        }
        (self.on_user)(user).map_err(|e| {
            self.failed = Some(e);
            E::custom("stopped")
        })
    }
}

/// The keys of a realm object that matter here.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Key {
    Realm,
    Users,
    #[serde(other)]
    Other,
}

/// The whole document: a realm or an array of realms. Its value says which.
struct Top<'a, 's, 'f>(&'a mut State<'s, 'f>);

impl<'de> DeserializeSeed<'de> for Top<'_, '_, '_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, '_, '_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a realm object or an array of realm objects")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        realm(self.0, 0, map)?;
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let state = self.0;
        let mut index = 0;
        while seq.next_element_seed(RealmSeed { state: &mut *state, index })?.is_some() {
            index += 1;
        }
        Ok(true)
    }
}

struct RealmSeed<'a, 's, 'f> {
    state: &'a mut State<'s, 'f>,
    index: usize,
}

impl<'de> DeserializeSeed<'de> for RealmSeed<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RealmSeed<'_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a realm object")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        realm(self.state, self.index, map)
    }
}

fn realm<'de, A: MapAccess<'de>>(state: &mut State<'_, '_>, index: usize, mut map: A) -> Result<(), A::Error> {
    let mut name: Option<String> = None;
    let mut held: Vec<KcUser> = Vec::new();
    while let Some(key) = map.next_key::<Key>()? {
        match key {
            Key::Realm => name = map.next_value::<Option<String>>()?,
            Key::Users => match state.decide(index, name.as_deref()) {
                Decision::Process => map.next_value_seed(Users { state: &mut *state, hold: None })?,
                Decision::Hold => map.next_value_seed(Users { state: &mut *state, hold: Some(&mut held) })?,
                Decision::Ignore => {
                    map.next_value::<IgnoredAny>()?;
                }
            },
            Key::Other => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    let name = name.unwrap_or_default();
    if state.decide(index, Some(&name)) == Decision::Process {
        state.report.matched = true;
        for user in held {
            state.feed(user)?;
        }
    }
    state.report.realms.push(name);
    Ok(())
}

/// A realm's `users` array (or `null`), fed to the callback or held.
struct Users<'a, 'b, 's, 'f> {
    state: &'a mut State<'s, 'f>,
    hold: Option<&'b mut Vec<KcUser>>,
}

impl<'de> DeserializeSeed<'de> for Users<'_, '_, '_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Users<'_, '_, '_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of users")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Users { state, mut hold } = self;
        while let Some(user) = seq.next_element::<KcUser>()? {
            match hold.as_deref_mut() {
                Some(held) => held.push(user),
                None => state.feed(user)?,
            }
        }
        Ok(())
    }
}
