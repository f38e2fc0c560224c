//! The terminal and the socket around the model: reads the daemon every
//! interval, turns terminal events into [`Key`]s, draws.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use atoll_client::{Client, ClientError};
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::model::{Command, Key, Model, Snapshot};
use super::{view, TopArgs};

/// Why `atoll top` stopped.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// Standard input or output is not a terminal.
    #[error("atoll top needs a terminal (for a one-off reading use `atoll status`)")]
    NotATerminal,
    /// The terminal could not be set up, read or drawn on.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    /// The first reading failed (later ones are shown on screen).
    #[error(transparent)]
    Daemon(#[from] ClientError),
}

/// Reads everything the screen shows, over one connection.
pub fn read(client: &mut Client, decisions: usize) -> Result<Snapshot, ClientError> {
    Ok(Snapshot {
        status: client.status()?,
        overlays: client.overlays()?,
        apps: client.apps()?,
        decisions: client.why(None, Some(decisions))?,
    })
}

/// A terminal key as the model's key; `None` for keys it ignores.
fn key_of(k: &KeyEvent) -> Option<Key> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    if k.modifiers.contains(KeyModifiers::CONTROL) {
        // Raw mode turns Ctrl-C into a key: quit as `q` does.
        return matches!(k.code, KeyCode::Char('c')).then_some(Key::Char('q'));
    }
    Some(match k.code {
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        _ => return None,
    })
}

/// The daemon, reconnected after an error (a daemon that restarted).
struct Source<'a> {
    socket: &'a Path,
    client: Option<Client>,
    decisions: usize,
}

impl Source<'_> {
    fn client(&mut self) -> Result<&mut Client, ClientError> {
        if self.client.is_none() {
            let mut c = Client::connect(self.socket)?;
            // A screen that waits 30 s for an answer looks hung.
            c.set_timeout(Some(Duration::from_secs(5)))?;
            self.client = Some(c);
        }
        Ok(self.client.as_mut().expect("just connected"))
    }

    fn keep<T>(&mut self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        if r.is_err() {
            self.client = None;
        }
        r
    }

    fn snapshot(&mut self) -> Result<Snapshot, ClientError> {
        let decisions = self.decisions;
        let r = self.client().and_then(|c| read(c, decisions));
        self.keep(r)
    }

    fn history(&mut self, unit: &str) -> Result<Vec<atoll_core::decision::Decision>, ClientError> {
        let r = self.client().and_then(|c| c.why(Some(unit), Some(500)));
        self.keep(r)
    }
}

/// Runs until `q`.
pub fn top(args: &TopArgs) -> Result<(), TopError> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(TopError::NotATerminal);
    }
    let mut source = Source {
        socket: &args.socket,
        client: None,
        decisions: args.decisions,
    };
    let mut model = Model::new(args.interval);
    // The first reading before the terminal changes: no daemon, no screen.
    model.update(source.snapshot()?);
    let mut terminal = ratatui::try_init()?;
    let result = event_loop(&mut terminal, &mut model, &mut source, args.interval);
    ratatui::try_restore()?;
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    model: &mut Model,
    source: &mut Source<'_>,
    interval: Duration,
) -> Result<(), TopError> {
    let mut next = Instant::now() + interval;
    loop {
        terminal.draw(|f| view::draw(f, model))?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait)? {
            let Event::Key(k) = event::read()? else {
                continue; // a resize: draw again
            };
            let Some(key) = key_of(&k) else { continue };
            match model.key(key) {
                Command::Quit => return Ok(()),
                Command::History(unit) => refresh_history(model, source, &unit),
                Command::Redraw => {}
            }
            continue;
        }
        match source.snapshot() {
            Ok(s) => model.update(s),
            Err(e) => model.set_error(e.to_string()),
        }
        if let Some(unit) = model.history_unit().map(str::to_string) {
            refresh_history(model, source, &unit);
        }
        next = Instant::now() + interval;
    }
}

fn refresh_history(model: &mut Model, source: &mut Source<'_>, unit: &str) {
    match source.history(unit) {
        Ok(d) => model.set_history(unit, d),
        Err(e) => model.set_error(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn terminal_keys_become_model_keys() {
        let none = KeyModifiers::NONE;
        assert_eq!(
            key_of(&press(KeyCode::Char('s'), none)),
            Some(Key::Char('s'))
        );
        assert_eq!(
            key_of(&press(KeyCode::Char('S'), KeyModifiers::SHIFT)),
            Some(Key::Char('S'))
        );
        assert_eq!(key_of(&press(KeyCode::Enter, none)), Some(Key::Enter));
        assert_eq!(key_of(&press(KeyCode::Esc, none)), Some(Key::Esc));
        assert_eq!(key_of(&press(KeyCode::PageDown, none)), Some(Key::PageDown));
        assert_eq!(
            key_of(&press(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Key::Char('q')),
            "Ctrl-C quits in raw mode"
        );
        assert_eq!(
            key_of(&press(KeyCode::Char('s'), KeyModifiers::CONTROL)),
            None
        );
        assert_eq!(key_of(&press(KeyCode::F(1), none)), None);
        let mut release = press(KeyCode::Char('q'), none);
        release.kind = KeyEventKind::Release;
        assert_eq!(key_of(&release), None, "one key, one action");
    }
}
