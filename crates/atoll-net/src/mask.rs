//! CPU masks in the kernel's hexadecimal bitmap format (`rps_cpus`,
//! `xps_cpus`, `smp_affinity`): 32-bit groups of eight hex digits,
//! most significant first, separated by commas (`00000000,00000005` is
//! CPUs 0 and 2).

use atoll_core::IdSet;

/// Formats `cpus` as a bitmap, with as many 32-bit groups as the highest
/// CPU needs (at least one).
pub fn format_mask(cpus: &IdSet) -> String {
    let groups = cpus.last().map_or(1, |last| last / 32 + 1);
    let mut words = vec![0u32; usize::try_from(groups).unwrap_or(1)];
    for cpu in cpus.iter() {
        if let Some(w) = usize::try_from(cpu / 32)
            .ok()
            .and_then(|i| words.get_mut(i))
        {
            *w |= 1 << (cpu % 32);
        }
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a bitmap; `None` if it is not one.
pub fn parse_mask(text: &str) -> Option<IdSet> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut set = IdSet::new();
    for (i, group) in text.rsplit(',').enumerate() {
        if group.is_empty() || group.len() > 8 {
            return None;
        }
        let word = u32::from_str_radix(group, 16).ok()?;
        let base = u32::try_from(i).ok()?.checked_mul(32)?;
        for bit in 0..32 {
            if word & (1 << bit) != 0 {
                set.insert(base + bit);
            }
        }
    }
    Some(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_groups() {
        let cpus = IdSet::parse("0,2,33").unwrap();
        assert_eq!(format_mask(&cpus), "00000002,00000005");
        assert_eq!(parse_mask("00000002,00000005"), Some(cpus));
        assert_eq!(format_mask(&IdSet::new()), "00000000");
        assert_eq!(parse_mask("3\n"), Some(IdSet::parse("0-1").unwrap()));
        assert_eq!(parse_mask("0"), Some(IdSet::new()));
    }

    #[test]
    fn rejects_what_is_not_a_mask() {
        assert_eq!(parse_mask(""), None);
        assert_eq!(parse_mask("xyz"), None);
        assert_eq!(parse_mask("1,,2"), None);
        assert_eq!(parse_mask("123456789"), None);
    }

    #[test]
    fn round_trips() {
        for list in ["0", "1-3", "31-32", "0,63,64", "5-70"] {
            let cpus = IdSet::parse(list).unwrap();
            assert_eq!(parse_mask(&format_mask(&cpus)), Some(cpus), "{list}");
        }
    }
}
