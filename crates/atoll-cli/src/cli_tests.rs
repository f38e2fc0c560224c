//! Argument parsing of the coordination commands.

use std::path::Path;

use atoll_client::coord::{Direction, Message, Resource};
use atoll_core::Name;
use clap::error::ErrorKind;
use clap::Parser;

use crate::cmd_coord::OverlayCmd;
use crate::{Cli, Cmd};

fn n(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn parse(args: &[&str]) -> Result<Cmd, clap::Error> {
    Cli::try_parse_from(std::iter::once("atoll").chain(args.iter().copied())).map(|c| c.command)
}

/// The sender and message of a coordination command line.
fn message(args: &[&str]) -> (Option<String>, Message) {
    match parse(args).unwrap() {
        Cmd::Coord(c) => c.message(),
        other => panic!("{args:?} parsed as {other:?}"),
    }
}

fn refused(args: &[&str]) -> ErrorKind {
    parse(args)
        .map(|c| panic!("{args:?} parsed as {c:?}"))
        .unwrap_err()
        .kind()
}

#[test]
fn tune_defaults_to_cpu_time_and_the_units_island() {
    assert_eq!(
        message(&["tune", "shop", "api", "up"]),
        (
            None,
            Message::Tune {
                resource: Resource::CpuTime,
                dir: Direction::Up,
                overlay: n("shop"),
                unit: n("api"),
            }
        )
    );
    assert_eq!(
        message(&[
            "tune",
            "shop",
            "api",
            "down",
            "--resource",
            "memory",
            "--from",
            "web"
        ]),
        (
            Some("web".into()),
            Message::Tune {
                resource: Resource::Memory,
                dir: Direction::Down,
                overlay: n("shop"),
                unit: n("api"),
            }
        )
    );
    assert_eq!(
        refused(&["tune", "shop", "api", "up", "--resource", "cores"]),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        refused(&["tune", "shop", "api", "sideways"]),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        refused(&["tune", "shop", "a.b", "up"]),
        ErrorKind::ValueValidation
    );
    assert_eq!(
        refused(&["tune", "shop", "api"]),
        ErrorKind::MissingRequiredArgument
    );
}

#[test]
fn trigger_boosts_cpu_time() {
    assert_eq!(
        message(&["trigger", "shop", "api", "--socket", "/tmp/s"]),
        (
            None,
            Message::Trigger {
                resource: Resource::CpuTime,
                overlay: n("shop"),
                unit: n("api"),
            }
        )
    );
    assert_eq!(
        message(&["trigger", "shop"]),
        (
            None,
            Message::TriggerOverlay {
                resource: Resource::CpuTime,
                overlay: n("shop"),
            }
        ),
        "no unit: the whole overlay at once"
    );
    match parse(&["trigger", "shop", "api", "--socket", "/tmp/s", "--json"]).unwrap() {
        Cmd::Coord(c) => {
            assert_eq!(c.common().socket.socket, Path::new("/tmp/s"));
            assert!(c.common().json);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn borrow_names_the_lender_with_from_and_the_borrower_with_into() {
    assert_eq!(
        message(&["borrow", "shop"]),
        (
            None,
            Message::BorrowAny {
                resource: Resource::Cores,
                overlay: n("shop"),
                amount: 1,
            }
        )
    );
    assert_eq!(
        message(&["borrow", "shop", "--amount", "2", "--from", "batch", "--into", "web"]),
        (
            Some("web".into()),
            Message::BorrowPreferred {
                resource: Resource::Cores,
                overlay: n("shop"),
                island: n("batch"),
                amount: 2,
            }
        )
    );
    assert_eq!(
        message(&["borrow", "shop", "--into", "web", "--amount", "3"]).1,
        Message::BorrowAny {
            resource: Resource::Cores,
            overlay: n("shop"),
            amount: 3,
        }
    );
    assert_eq!(
        refused(&["borrow", "shop", "--amount", "0"]),
        ErrorKind::ValueValidation
    );
}

#[test]
fn release_needs_the_lender_and_sends_from_the_borrower() {
    assert_eq!(
        message(&["release", "shop", "--lender", "batch", "--from", "web"]),
        (
            Some("web".into()),
            Message::Release {
                resource: Resource::Cores,
                overlay: n("shop"),
                island: n("batch"),
            }
        )
    );
    assert_eq!(message(&["release", "shop", "--lender", "batch"]).0, None);
    assert_eq!(
        refused(&["release", "shop"]),
        ErrorKind::MissingRequiredArgument
    );
}

#[test]
fn report_takes_a_finite_value_and_overlay_takes_ls_and_show() {
    match parse(&["report", "shop", "7300.5", "--json"]).unwrap() {
        Cmd::Report(r) => {
            assert_eq!(r.overlay, n("shop"));
            assert_eq!(r.value, 7300.5);
            assert!(r.common.json);
        }
        other => panic!("{other:?}"),
    }
    for bad in ["inf", "NaN", "fast"] {
        assert_eq!(
            refused(&["report", "shop", bad]),
            ErrorKind::ValueValidation
        );
    }
    assert!(matches!(
        parse(&["overlay", "ls"]).unwrap(),
        Cmd::Overlay(OverlayCmd::Ls { json: false, .. })
    ));
    assert!(matches!(
        parse(&["overlay", "list", "--json"]).unwrap(),
        Cmd::Overlay(OverlayCmd::Ls { json: true, .. })
    ));
    match parse(&["overlay", "show", "shop"]).unwrap() {
        Cmd::Overlay(OverlayCmd::Show { name, json, .. }) => {
            assert_eq!(name, "shop");
            assert!(!json);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse(&["overlay"]).unwrap_err().kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
    ));
}

#[test]
fn a_nack_exits_with_three_and_an_ack_with_zero() {
    use atoll_client::coord::{CoordReply, Coordinated, NackReason};
    let ack = Coordinated {
        reply: CoordReply::Ack { effects: vec![] },
        text: "ack".into(),
    };
    assert_eq!(crate::cmd_coord::exit_status(&ack), 0);
    let nack = Coordinated {
        reply: CoordReply::nack(NackReason::ZeroAmount),
        text: String::new(),
    };
    assert_eq!(crate::cmd_coord::exit_status(&nack), crate::cmd_coord::NACK);
    assert_eq!(crate::cmd_coord::NACK, 3);
}

#[test]
fn overlay_add_and_set_take_a_power_cap_in_watts() {
    let settings = |args: &[&str]| match parse(args).unwrap() {
        Cmd::Overlay(OverlayCmd::Add { name, flags, .. })
        | Cmd::Overlay(OverlayCmd::Set { name, flags, .. }) => {
            assert_eq!(name, "budget");
            flags.settings()
        }
        other => panic!("{args:?} parsed as {other:?}"),
    };
    let add = settings(&["overlay", "add", "budget", "--power-cap-watts", "95.5"]);
    assert_eq!(add.power_cap_watts, Some(95.5));
    assert!(add.has_property());
    assert_eq!(add.units, None);
    assert_eq!(add.cpu_cap, None);
    let set = settings(&["overlay", "set", "budget", "--power-cap-watts", "120"]);
    assert_eq!(set.power_cap_watts, Some(120.0));
    // The request as sent: the key the daemon reads.
    let json = serde_json::to_value(&set).unwrap();
    assert_eq!(json, serde_json::json!({"power_cap_watts": 120.0}));
    assert_eq!(
        refused(&["overlay", "add", "budget", "--power-cap-watts", "lots"]),
        ErrorKind::ValueValidation
    );
}

#[test]
fn run_and_adopt_take_unit_adds_network_flags_and_unit_set_can_clear_the_class() {
    use atoll_proto::runtime::NetClassSettings;

    use crate::cmd_runtime::UnitCmd;

    let wire = Some(NetClassSettings {
        island: "wire".into(),
        share: Some(200),
        ceil_mbit: Some(5),
        prio: Some(1),
    });
    let flags = ["--net-island", "wire", "--net-share", "200"];
    let more = ["--net-ceil-mbit", "5", "--net-prio", "1"];
    let mut run = vec!["run", "--unit", "job"];
    run.extend(flags);
    run.extend(more);
    run.extend(["--", "sleep", "1"]);
    match parse(&run).unwrap() {
        Cmd::Run { net, command, .. } => {
            assert_eq!(net.class(), wire);
            assert_eq!(command, ["sleep", "1"]);
        }
        other => panic!("parsed as {other:?}"),
    }
    let mut adopt = vec!["adopt", "--unit", "job", "--pid", "42"];
    adopt.extend(flags);
    adopt.extend(more);
    match parse(&adopt).unwrap() {
        Cmd::Adopt { net, pid, .. } => {
            assert_eq!(net.class(), wire);
            assert_eq!(pid, 42);
        }
        other => panic!("parsed as {other:?}"),
    }
    // The same flags as `unit add`, the same settings.
    let mut add = vec!["unit", "add", "job"];
    add.extend(flags);
    add.extend(more);
    match parse(&add).unwrap() {
        Cmd::Unit(UnitCmd::Add { flags, .. }) => assert_eq!(flags.settings().network, wire),
        other => panic!("parsed as {other:?}"),
    }
    // A share without an island, or a class and its removal, are refused.
    assert_eq!(
        refused(&["run", "--unit", "j", "--net-share", "5", "--", "true"]),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        refused(&[
            "unit",
            "set",
            "job",
            "--no-net-class",
            "--net-island",
            "wire"
        ]),
        ErrorKind::ArgumentConflict
    );
    match parse(&["unit", "set", "job", "--no-net-class"]).unwrap() {
        Cmd::Unit(UnitCmd::Set { no_net_class, .. }) => assert!(no_net_class),
        other => panic!("parsed as {other:?}"),
    }
}
