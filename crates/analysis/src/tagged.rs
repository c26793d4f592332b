//! A profile's samples by what their threads served (`Profile::tags`): the samples of one
//! class, client, speed bucket, phase or request, and one profile per group.

use std::collections::BTreeMap;

use reqcost_record::{Profile, SampleTag, TAG_KEYS};

/// Group of samples without a tag (taken before the probes tagged, or whose tag was gone).
pub const UNTAGGED: &str = "(untagged)";

/// A `KEY=VALUE` condition on samples' tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    pub key: String,
    pub value: String,
}

impl std::str::FromStr for TagFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<TagFilter, String> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("{s}: expected KEY=VALUE, e.g. class=/blog"))?;
        check_key(key)?;
        Ok(TagFilter {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// Whether `key` names a tag field; the error lists them.
pub fn check_key(key: &str) -> Result<(), String> {
    if TAG_KEYS.contains(&key) {
        Ok(())
    } else {
        Err(format!(
            "{key}: not a sample tag; use one of {}",
            TAG_KEYS.join(", ")
        ))
    }
}

/// The value of `key` for a stack's tag; [`UNTAGGED`] without one.
fn value_of<'a>(p: &'a Profile, tag: Option<u32>, key: &str) -> &'a str {
    tag.and_then(|t| p.tags.get(t as usize))
        .and_then(|t: &SampleTag| t.get(key))
        .unwrap_or(UNTAGGED)
}

/// Why `p` cannot be grouped by its tags, if it cannot.
fn untagged(p: &Profile) -> Result<(), String> {
    if p.tags.is_empty() {
        return Err(
            "the samples carry no request tags (the probes were off, or the record is \
                    older than per-request samples): measure again with the probes on"
                .into(),
        );
    }
    Ok(())
}

/// The profile of the samples whose tags match every filter (frames kept as they are).
pub fn select(p: &Profile, filters: &[TagFilter]) -> Result<Profile, String> {
    untagged(p)?;
    let mut out = Profile {
        stacks: Vec::new(),
        samples: 0,
        ..p.clone()
    };
    for s in &p.stacks {
        if filters
            .iter()
            .all(|f| value_of(p, s.tag, &f.key) == f.value)
        {
            out.samples += s.count;
            out.stacks.push(s.clone());
        }
    }
    Ok(out)
}

/// The samples of `groups` as one profile, described as `like`.
pub fn merge(like: &Profile, groups: impl IntoIterator<Item = Profile>) -> Profile {
    let mut merged = Profile {
        stacks: Vec::new(),
        samples: 0,
        ..like.clone()
    };
    for g in groups {
        merged.samples += g.samples;
        merged.stacks.extend(g.stacks);
    }
    merged
}

/// One profile per value of `key`, most samples first (ties by value).
pub fn split(p: &Profile, key: &str) -> Result<Vec<(String, Profile)>, String> {
    check_key(key)?;
    untagged(p)?;
    let mut groups: BTreeMap<&str, Profile> = BTreeMap::new();
    for s in &p.stacks {
        let g = groups
            .entry(value_of(p, s.tag, key))
            .or_insert_with(|| Profile {
                stacks: Vec::new(),
                samples: 0,
                ..p.clone()
            });
        g.samples += s.count;
        g.stacks.push(s.clone());
    }
    let mut out: Vec<(String, Profile)> = groups
        .into_iter()
        .map(|(k, g)| (k.to_string(), g))
        .collect();
    out.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{Frame, Stack};

    fn profile() -> Profile {
        let frame = |f: &str| Frame {
            function: f.into(),
            module: "srv".into(),
            kernel: false,
            inlined: false,
            resolved: true,
        };
        let stack = |frames: Vec<u32>, count, tag| Stack {
            frames,
            thread: "srv".into(),
            count,
            tag,
        };
        let class = |c: &str| SampleTag {
            class: c.into(),
            ..SampleTag::default()
        };
        Profile {
            frames: vec![frame("burn_a"), frame("burn_b"), frame("main")],
            stacks: vec![
                stack(vec![0, 2], 7, Some(0)),
                stack(vec![1, 2], 3, Some(1)),
                stack(vec![2], 2, None),
            ],
            samples: 12,
            tags: vec![class("/a"), class("/b")],
            ..Profile::default()
        }
    }

    #[test]
    fn select_keeps_the_matching_samples() {
        let f: TagFilter = "class=/a".parse().unwrap();
        let a = select(&profile(), &[f]).unwrap();
        assert_eq!(a.samples, 7);
        assert_eq!(a.stacks.len(), 1);
        assert_eq!(a.stacks[0].frames, [0, 2]);
    }

    #[test]
    fn split_groups_by_value_most_samples_first() {
        let groups = split(&profile(), "class").unwrap();
        let names: Vec<(&str, u64)> = groups
            .iter()
            .map(|(n, p)| (n.as_str(), p.samples))
            .collect();
        assert_eq!(names, [("/a", 7), ("/b", 3), (UNTAGGED, 2)]);
    }

    #[test]
    fn bad_keys_and_untagged_profiles_are_refused() {
        assert!("colour=red"
            .parse::<TagFilter>()
            .unwrap_err()
            .contains("class, client"));
        assert!("class"
            .parse::<TagFilter>()
            .unwrap_err()
            .contains("KEY=VALUE"));
        let old = Profile {
            tags: vec![],
            ..profile()
        };
        assert!(split(&old, "class")
            .unwrap_err()
            .contains("no request tags"));
    }
}
