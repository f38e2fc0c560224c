//! `atoll run`: start a command inside a unit.
//!
//! The command must not run a single instruction outside its unit, so it is
//! started gated: we fork, the child waits on a pipe, we ask the daemon to
//! adopt the child's pid, and only then let it `exec`. If the daemon says
//! no, the child is killed before it ran. (std's `Command::spawn` cannot do
//! this: it waits for the `exec`, which would wait for us.)
//!
//! The command runs as the caller, with the caller's environment; the daemon
//! only moves it. Our exit code is the command's (128 + N if killed by
//! signal N). SIGTERM, SIGHUP and SIGQUIT sent to us are passed on to it;
//! SIGINT from the terminal reaches it directly. Standard output is the
//! command's: the line saying where it runs goes to standard error (with
//! `--json`, as a JSON object: `{"pid", "unit", "island", "created"}`).

use std::ffi::CString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context};
use atoll_client::Client;
use atoll_proto::runtime::NetClassSettings;

/// The child to forward signals to (0: none yet). A signal handler can only
/// reach a static.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

pub fn run(
    socket: &Path,
    unit: &str,
    island: Option<&str>,
    network: Option<NetClassSettings>,
    argv: &[String],
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| {
            CString::new(a.as_str()).with_context(|| format!("argument {a:?} contains a NUL byte"))
        })
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe2");
    }
    let (gate_r, gate_w) = (fds[0], fds[1]);
    // SAFETY: this process is single-threaded here (the client does blocking
    // I/O on this thread), so the child may run the code below, which only
    // calls async-signal-safe functions (close, read, execvp, write, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: see above; every pointer is valid for the child's lifetime.
        unsafe { child(gate_r, gate_w, &ptrs) }
    }
    // SAFETY: closing our copy of the read end, a valid fd.
    unsafe { libc::close(gate_r) };
    let child_pid = u32::try_from(pid).expect("fork returned a positive pid in the parent");
    let adopted = client.adopt_with_class(unit, child_pid, island, network);
    match adopted {
        Ok(a) if json => {
            eprintln!(
                "{}",
                serde_json::to_string(&crate::cmd_client::adopted_json(child_pid, &a))?
            );
        }
        Ok(a) => {
            eprintln!(
                "atoll: pid {pid} runs in unit {} (island {}){}",
                a.unit,
                a.island,
                if a.created { ", created" } else { "" }
            );
        }
        Err(e) => {
            // SAFETY: pid is our child; closing our write end unblocks it
            // with EOF and it exits without exec; SIGKILL makes sure.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::close(gate_w);
            }
            reap(pid)?;
            bail!("the command was not started: {e}");
        }
    }
    CHILD.store(pid, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: `forward` is an extern "C" fn that only calls kill.
        unsafe {
            libc::signal(sig, forward as *const () as libc::sighandler_t);
        }
    }
    // SAFETY: SIG_IGN for SIGINT: the terminal delivers it to the child too.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    // Open the gate.
    // SAFETY: writing one byte from a valid buffer to our pipe end.
    let n = unsafe { libc::write(gate_w, b"g".as_ptr().cast(), 1) };
    // SAFETY: closing our write end.
    unsafe { libc::close(gate_w) };
    if n != 1 {
        bail!(
            "could not release the child: {}",
            std::io::Error::last_os_error()
        );
    }
    reap(pid)
}

/// The child: wait at the gate, then exec. Never returns.
///
/// # Safety
/// Must run in a freshly forked child of a single-threaded parent; `argv`
/// must be a NULL-terminated array of valid C strings.
unsafe fn child(gate_r: libc::c_int, gate_w: libc::c_int, argv: &[*const libc::c_char]) -> ! {
    // SAFETY: (whole body) async-signal-safe calls on valid fds and pointers.
    unsafe {
        libc::close(gate_w);
        let mut b = 0u8;
        let n = loop {
            let n = libc::read(gate_r, (&mut b as *mut u8).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break n;
        };
        if n != 1 {
            libc::_exit(126);
        }
        libc::close(gate_r);
        libc::execvp(argv[0], argv.as_ptr());
        let msg = b"atoll: exec failed\n";
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(127);
    }
}

/// Waits for `pid`; its exit status becomes ours.
fn reap(pid: libc::pid_t) -> anyhow::Result<ExitCode> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child with a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waitpid");
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
