//! Parsing `/proc/PID/stat`.
//!
//! The line is `pid (comm) state ppid ...`. `comm` is whatever the process
//! named itself (up to 15 bytes) and may contain spaces and parentheses, so
//! it is taken as everything between the first `(` and the **last** `)`; the
//! remaining fields are split on white space after that. Field numbers below
//! follow `proc(5)` (1-based).

use std::path::Path;

use atoll_core::process::ProcessError;

/// `PF_KTHREAD` in the `flags` field (9): the task is a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of `/proc/PID/stat` atoll uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Field 1.
    pub pid: u32,
    /// Field 2, without the parentheses.
    pub comm: String,
    /// Field 3 (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 9 (`PF_*` flags).
    pub flags: u64,
    /// Fields 14 + 15: user and system time, clock ticks.
    pub cpu_ticks: u64,
    /// Field 20.
    pub num_threads: u64,
    /// Field 22: start time in clock ticks after boot.
    pub start_ticks: u64,
}

impl Stat {
    /// Whether this is a kernel thread: `PF_KTHREAD` is set, or it is
    /// `kthreadd` (pid 2) or one of its children.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0 || self.pid == 2 || self.ppid == 2
    }
}

/// Parses the text of a `stat` file; `path` is only used in errors.
pub fn parse_stat(path: &Path, text: &str) -> Result<Stat, ProcessError> {
    let err = |reason: &str| ProcessError::Parse {
        path: path.to_path_buf(),
        value: text.trim_end().to_string(),
        reason: reason.to_string(),
    };
    let open = text.find('(').ok_or_else(|| err("no '(' before comm"))?;
    let close = text.rfind(')').ok_or_else(|| err("no ')' after comm"))?;
    if close < open {
        return Err(err("')' before '('"));
    }
    let pid = text[..open]
        .trim()
        .parse::<u32>()
        .map_err(|_| err("field 1 (pid) is not a number"))?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3, so field n is rest[n - 3].
    let field = |n: usize, name: &str| -> Result<&str, ProcessError> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| err(&format!("field {n} ({name}) is missing")))
    };
    let number = |n: usize, name: &str| -> Result<u64, ProcessError> {
        field(n, name)?
            .parse::<u64>()
            .map_err(|_| err(&format!("field {n} ({name}) is not a number")))
    };
    let state_field = field(3, "state")?;
    let mut chars = state_field.chars();
    let state = match (chars.next(), chars.next()) {
        (Some(c), None) => c,
        _ => return Err(err("field 3 (state) is not one character")),
    };
    let ppid = u32::try_from(number(4, "ppid")?).map_err(|_| err("field 4 (ppid) is too large"))?;
    Ok(Stat {
        pid,
        comm,
        state,
        ppid,
        flags: number(9, "flags")?,
        cpu_ticks: number(14, "utime")?.saturating_add(number(15, "stime")?),
        num_threads: number(20, "num_threads")?,
        start_ticks: number(22, "starttime")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(pid: u32, comm: &str, ppid: u32, flags: u64, start: u64) -> String {
        format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 {flags} 10 0 0 0 1 2 0 0 20 0 3 0 {start} \
             1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        )
    }

    #[test]
    fn parses_fields_after_the_last_paren() {
        let s = parse_stat(
            Path::new("/p/7/stat"),
            &line(7, "(a) b)", 1, 0x400100, 4242),
        )
        .unwrap();
        assert_eq!(s.comm, "(a) b)");
        assert_eq!(s.pid, 7);
        assert_eq!(s.ppid, 1);
        assert_eq!(s.state, 'S');
        assert_eq!(s.flags, 0x400100);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.cpu_ticks, 3); // utime 1 + stime 2
        assert_eq!(s.start_ticks, 4242);
        assert!(!s.is_kernel_thread());
        let s = parse_stat(Path::new("x"), &line(9, "my prog", 1, 0, 1)).unwrap();
        assert_eq!(s.comm, "my prog");
        let s = parse_stat(Path::new("x"), &line(9, "", 1, 0, 1)).unwrap();
        assert_eq!(s.comm, "");
    }

    #[test]
    fn kernel_threads_by_flag_or_kthreadd() {
        let k = |pid, ppid, flags| {
            parse_stat(Path::new("x"), &line(pid, "k", ppid, flags, 1))
                .unwrap()
                .is_kernel_thread()
        };
        assert!(k(50, 0, PF_KTHREAD | 0x40));
        assert!(k(2, 0, 0));
        assert!(k(51, 2, 0));
        assert!(!k(52, 1, 0x40));
    }

    #[test]
    fn malformed_lines_name_the_path_value_and_field() {
        let path = Path::new("/fake/proc/12/stat");
        for (text, want) in [
            ("12 comm S 1", "'('"),
            ("12 (comm S 1", "')'"),
            ("x (comm) S 1", "field 1"),
            ("12 (comm) S", "field 4 (ppid) is missing"),
            ("12 (comm) S one", "field 4 (ppid) is not a number"),
            ("12 (comm) SR 1", "field 3"),
            (
                "12 (c) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 soon",
                "field 22 (starttime)",
            ),
        ] {
            let e = parse_stat(path, text).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("/fake/proc/12/stat"), "{msg}");
            assert!(msg.contains(want), "{text:?}: {msg}");
            assert!(
                matches!(&e, ProcessError::Parse { value, .. } if value == text),
                "{e:?}"
            );
        }
    }
}
