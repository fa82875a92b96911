//! `apply`'s input on both backends (README, "apply"): a reader thread reads, parses and
//! validates JSON lines ahead of the writer and hands them over in chunks, each saying whether
//! more input was already waiting. A batch commits as soon as no more input is waiting, so an
//! interactive writer gets each outcome at once, and a bulk load still fills big batches.

use crate::model::LineError;
use crate::store::prepared::PreparedWrite;
use anyhow::{bail, Result};
use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

/// Where `apply`'s input comes from: a regular file is read to its end without ever waiting,
/// so its batches fill up to their limits (and come out the same every run); a stream (a pipe,
/// a terminal, a socket) may pause, and a batch commits whenever no more input is waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    File,
    Stream,
}

impl InputKind {
    /// What `file` is: `File` for a regular file (stdin redirected from one too), else
    /// `Stream`.
    pub fn of(file: &std::fs::File) -> InputKind {
        match file.metadata() {
            Ok(m) if m.is_file() => InputKind::File,
            _ => InputKind::Stream,
        }
    }

    /// What standard input is, by `stat` alone: a descriptor opened and closed here would drop
    /// this process's locks on the file it names, were that the database.
    pub fn of_stdin() -> InputKind {
        match std::fs::metadata("/dev/stdin") {
            Ok(m) if m.is_file() => InputKind::File,
            _ => InputKind::Stream,
        }
    }
}

/// An `apply` input line after parsing and validation, before it meets the database.
pub(crate) enum ParsedLine {
    Ready(Box<PreparedWrite>),
    Invalid(LineError),
}

/// How long a batch waits for more input at a time before it commits what it has, and how
/// long it may wait in all: a bulk load rarely waits (the reader is ahead), a source that
/// trickles in part-lines would otherwise hold its batch (on SQLite, the write lock) open.
const WAIT: Duration = Duration::from_millis(50);
const WAIT_TOTAL: Duration = Duration::from_millis(200);

/// The lines of one `apply` transaction, gathered as they arrive.
pub(crate) struct Batch {
    pub(crate) lines: Vec<(u64, ParsedLine)>,
    bytes: usize,
    /// More input was waiting when the last chunk was cut.
    flowing: bool,
    /// Time spent waiting for input.
    waited: Duration,
    max_lines: usize,
    max_bytes: usize,
}

impl Batch {
    /// More input was waiting and the batch has room for it.
    pub(crate) fn wants_more(&self) -> bool {
        self.flowing && self.lines.len() < self.max_lines && self.bytes < self.max_bytes
    }

    /// Takes the next chunk in, waiting a moment for it; once the batch's waiting budget is
    /// spent, or the input paused or ended, the batch wants no more.
    pub(crate) fn wait_for_more(&mut self, intake: &mut Intake) -> Result<()> {
        // A file never pauses: its next lines are only as far away as the reader's parsing,
        // however loaded the machine, so its batches fill the same every run.
        if !intake.pauses {
            match intake.next(None)? {
                Some(chunk) => self.take(chunk, intake),
                None => self.flowing = false,
            }
            return Ok(());
        }
        let budget = WAIT_TOTAL.saturating_sub(self.waited);
        if budget.is_zero() {
            self.flowing = false;
            return Ok(());
        }
        let waiting = Instant::now();
        let next = intake.next(Some(budget.min(WAIT)))?;
        self.waited += waiting.elapsed();
        match next {
            Some(chunk) => self.take(chunk, intake),
            None => self.flowing = false,
        }
        Ok(())
    }

    /// Takes `chunk` in up to the batch's line limit; the lines beyond it go back to `intake`
    /// for the next batch, so a batch holds exactly its limit when input keeps coming. (The
    /// byte limit is checked between chunks: a batch may pass it by less than a chunk.)
    fn take(&mut self, mut chunk: Chunk, intake: &mut Intake) {
        let room = self.max_lines.saturating_sub(self.lines.len());
        if chunk.lines.len() > room {
            let rest = chunk.lines.split_off(room);
            let rest_bytes = chunk.bytes * rest.len() / (rest.len() + chunk.lines.len());
            intake.leftover = Some(Chunk {
                lines: rest,
                bytes: rest_bytes,
                stalled: chunk.stalled,
            });
            chunk.bytes -= rest_bytes;
            chunk.stalled = false;
        }
        self.bytes += chunk.bytes;
        self.flowing = !chunk.stalled;
        self.lines.extend(chunk.lines);
    }
}

/// The writer's end of the reader thread.
pub(crate) struct Intake {
    rx: std::sync::mpsc::Receiver<std::io::Result<Chunk>>,
    reader: Option<std::thread::JoinHandle<()>>,
    eof: bool,
    /// The lines of a chunk a full batch could not take, first in line for the next one.
    leftover: Option<Chunk>,
    /// The input is a stream, which may pause ([`InputKind`]).
    pauses: bool,
}

impl Intake {
    /// Starts the reader thread on `input`. If the writer fails, the reader is left to end
    /// with its input (or at its next chunk, once nobody takes it).
    pub(crate) fn start<R: Read + Send + 'static>(input: R, kind: InputKind) -> Result<Intake> {
        let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD_CHUNKS);
        let pauses = kind == InputKind::Stream;
        let reader = std::thread::Builder::new()
            .name("memscope-apply-reader".into())
            .spawn(move || read_ahead(input, pauses, tx))?;
        Ok(Intake {
            rx,
            reader: Some(reader),
            eof: false,
            leftover: None,
            pauses,
        })
    }

    /// The next chunk of parsed lines, waiting at most `wait` (forever with `None`); `None`
    /// when the wait ran out or the input ended. A read error, or a reader that died, is an
    /// error.
    pub(crate) fn next(&mut self, wait: Option<Duration>) -> Result<Option<Chunk>> {
        use std::sync::mpsc::RecvTimeoutError;
        if let Some(chunk) = self.leftover.take() {
            return Ok(Some(chunk));
        }
        if self.eof {
            return Ok(None);
        }
        let got = match wait {
            None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(wait) => self.rx.recv_timeout(wait),
        };
        match got {
            Ok(chunk) => Ok(Some(chunk?)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                // The reader hung up: the input ended — unless the reader died.
                self.eof = true;
                if let Some(handle) = self.reader.take() {
                    if handle.join().is_err() {
                        bail!("reading the input failed unexpectedly: nothing after the last outcome line was applied; run apply again on the rest");
                    }
                }
                Ok(None)
            }
        }
    }

    /// The next batch, waiting with no transaction open for its first line (`None`: the
    /// input ended), then taking in what keeps flowing within the batch's limits.
    pub(crate) fn next_batch(
        &mut self,
        max_lines: usize,
        max_bytes: usize,
    ) -> Result<Option<Batch>> {
        loop {
            let Some(first) = self.next(None)? else {
                return Ok(None);
            };
            if !first.lines.is_empty() {
                let mut batch = Batch {
                    lines: Vec::new(),
                    bytes: 0,
                    flowing: true,
                    waited: Duration::ZERO,
                    max_lines,
                    max_bytes,
                };
                batch.take(first, self);
                return Ok(Some(batch));
            }
        }
    }
}

/// Parsed lines handed from the reader thread to the writer.
pub(crate) struct Chunk {
    lines: Vec<(u64, ParsedLine)>,
    bytes: usize,
    /// No more input was waiting when the chunk was cut: commit what has been gathered.
    stalled: bool,
}

/// The byte order mark an editor may put at the start of a UTF-8 file.
pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Lines per chunk, input bytes per chunk, and chunks the reader may run ahead by.
const CHUNK_LINES: usize = 512;
const CHUNK_BYTES: usize = 4 << 20;
const READ_AHEAD_CHUNKS: usize = 8;

/// The reader thread of `apply`: reads, parses and validates lines (a fifth of the work of a
/// line) while the writer runs the database. Ends at the end of the input, at a read error
/// (sent on), or when the writer hangs up. Input that `pauses` (a stream) marks a chunk
/// stalled where its buffer ran dry.
fn read_ahead<R: Read>(
    input: R,
    pauses: bool,
    tx: std::sync::mpsc::SyncSender<std::io::Result<Chunk>>,
) {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut line_no: u64 = 0;
    let mut buf = Vec::new();
    loop {
        let mut chunk = Chunk {
            lines: Vec::with_capacity(CHUNK_LINES),
            bytes: 0,
            stalled: false,
        };
        let mut eof = false;
        while chunk.lines.len() < CHUNK_LINES && chunk.bytes < CHUNK_BYTES {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => chunk.bytes += n,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
            line_no += 1;
            // A UTF-8 byte order mark, which some Windows editors put before the first line,
            // is not part of the JSON (README, "apply").
            let text = match buf.strip_prefix(UTF8_BOM) {
                Some(rest) if line_no == 1 => rest,
                _ => &buf[..],
            };
            if let Some(parsed) = parse_line(text) {
                chunk.lines.push((line_no, parsed));
            }
            // Hand over what is parsed before a read that may block: with nothing buffered
            // the writer commits at once (an interactive writer waits for its outcome); with
            // only part of a line buffered it waits a moment for the rest. A file's reads
            // never block.
            let buffered = reader.buffer();
            if pauses && buffered.is_empty() {
                chunk.stalled = true;
                break;
            }
            if pauses && !buffered.contains(&b'\n') {
                break;
            }
        }
        if tx.send(Ok(chunk)).is_err() || eof {
            return;
        }
    }
}

/// Parses one input line; `None` for a blank line.
fn parse_line(bytes: &[u8]) -> Option<ParsedLine> {
    crate::store::prepared::parse_line(bytes).map(|parsed| match parsed {
        Ok(w) => ParsedLine::Ready(Box::new(w)),
        Err(e) => ParsedLine::Invalid(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Line `i`, exactly 128 bytes: 512 of them fill the reader's 64 KiB buffer, so a line ends
    /// exactly where every read does.
    fn line(i: usize) -> String {
        let head = format!(
            "{{\"subject\":\"user:{i}\",\"predicate\":\"偏好\",\"value\":\"值 {i} 🚀\",\"scope\":\"global\",\"source\":\""
        );
        let line = format!("{head}{}\"}}\n", "s".repeat(128 - head.len() - 3));
        assert_eq!(line.len(), 128);
        line
    }

    /// Every batch's size, reading `input` of `kind` to its end with batches of at most `max`.
    fn batches<R: Read + Send + 'static>(input: R, kind: InputKind, max: usize) -> Vec<usize> {
        let mut intake = Intake::start(input, kind).unwrap();
        let mut sizes = Vec::new();
        while let Some(mut batch) = intake.next_batch(max, usize::MAX).unwrap() {
            while batch.wants_more() {
                batch.wait_for_more(&mut intake).unwrap();
            }
            sizes.push(batch.lines.len());
        }
        sizes
    }

    #[test]
    fn a_file_fills_every_batch_whatever_its_buffer_boundaries() {
        // Lines that end exactly where the reader's 64 KiB buffer does, again and again: a
        // stream would stall there, a file never does.
        let text: String = (0..20_000).map(line).collect();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        assert_eq!(InputKind::of(&f), InputKind::File);
        assert_eq!(
            batches(f, InputKind::File, 3_000),
            [3_000, 3_000, 3_000, 3_000, 3_000, 3_000, 2_000]
        );
        // The same bytes taken for a stream end a batch wherever a read ended on a line's end.
        let cut = batches(std::io::Cursor::new(text), InputKind::Stream, 3_000);
        assert_eq!(cut.iter().sum::<usize>(), 20_000);
        assert!(cut.iter().all(|&n| n <= 512), "{cut:?}");
    }

    #[test]
    fn a_stream_commits_what_came_when_it_pauses() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        assert_eq!(
            InputKind::of(&std::fs::File::from(std::os::fd::OwnedFd::from(
                reader.try_clone().unwrap()
            ))),
            InputKind::Stream
        );
        let sender = std::thread::spawn(move || {
            for burst in [3, 2] {
                let text: String = (0..burst).map(line).collect();
                writer.write_all(text.as_bytes()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(400));
            }
        });
        assert_eq!(batches(reader, InputKind::Stream, 1_000), [3, 2]);
        sender.join().unwrap();
    }
}
