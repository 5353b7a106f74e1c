//! `w7`: regex compilation and search over a generated log, as a program that filters text does.

use std::collections::BTreeSet;
use std::hint::black_box;

use regex::{Regex, RegexSet};

use crate::rng::Rng;

/// Patterns of the kinds programs use: words and Unicode classes, addresses, dates and times, case-insensitive
/// literals, capture groups and whole-line matches.
const PATTERNS: [&str; 30] = [
    r"\w+",
    r"\p{L}+",
    r"\b\p{Lu}\p{Ll}+\b",
    r"(?i)\b(?:error|warning|fatal|critical)\b",
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    r"(\d{4})-(\d{2})-(\d{2})",
    r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?",
    r"\b(?:\d{1,3}\.){3}\d{1,3}\b",
    r"https?://[^\s/?#]+[^\s]*",
    r"\b0x[0-9a-fA-F]+\b",
    r"(\w+)=(\S+)",
    r"-?\d+(?:\.\d+)?",
    r"\b[A-Z]{2,}\b",
    r#""[^"]*""#,
    r"(?i)straße|café|zoë|ærøskøbing",
    r"(?i)connection (?:refused|reset|timed out)",
    r"[\p{Greek}\p{Cyrillic}]+",
    r"\p{Han}+|\p{Hangul}+",
    r"(?m)^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+ (INFO|WARN|ERROR|DEBUG) ([^:]+): (.*)$",
    r"\s{2,}",
    r"(?i)user\s+(\S+)",
    r"\b\w{12,}\b",
    r"[[:punct:]]+",
    r"(?x) (?P<name>[a-z]+) \. (?P<number>\d+) @ (?P<host>[a-z0-9.]+)",
    r"\bid=(\d+)\b",
    r"(?i)\bthe\s+\w+",
    r"[^\x00-\x7F]+",
    r"(?:GET|POST|PUT|DELETE) (/\S*) HTTP/1\.[01]",
    r"took (\d+) ?ms",
    r"\b(?:[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12})\b",
];

/// The pattern of [`PATTERNS`] whose matches the search rewrites: the dates.
const DATES: usize = 5;

/// The patterns of [`PATTERNS`] a set matches each line against, as a program sorting lines by kind: those without
/// Unicode word boundaries (`\b`), on which a lazy DFA gives up at the first byte that is not ASCII.
const LINE_KINDS: [usize; 10] = [4, 5, 8, 10, 13, 14, 15, 20, 27, 28];

/// Words of the generated log's messages.
const WORDS: [&str; 32] = [
    "the",
    "request",
    "user",
    "connection",
    "refused",
    "reset",
    "timed",
    "out",
    "error",
    "warning",
    "cache",
    "miss",
    "Straße",
    "café",
    "Zoë",
    "Ærøskøbing",
    "東京",
    "서울",
    "Αθήνα",
    "Москва",
    "value",
    "retry",
    "handler",
    "session",
    "database",
    "query",
    "Internationalization",
    "FATAL",
    "critical",
    "path",
    "token",
    "worker",
];

const LEVELS: [&str; 4] = ["INFO", "WARN", "ERROR", "DEBUG"];
const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];

/// `count` words of 2 to 4 syllables, for an alternation as long as a dictionary's.
fn dictionary(rng: &mut Rng, count: usize) -> Vec<String> {
    const SYLLABLES: [&str; 16] =
        ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ber", "dan", "gor", "hul", "pen", "quor", "stan", "wex"];
    let mut words = BTreeSet::new();
    while words.len() < count {
        let syllables = 2 + rng.below(3);
        words.insert((0..syllables).map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64)]).collect::<String>());
    }
    words.into_iter().collect()
}

/// A log of about `bytes` bytes: timestamped lines with a level, a module, a message of [`WORDS`] and of the
/// dictionary's words, and fields of the kinds the patterns look for.
fn log(rng: &mut Rng, bytes: usize, dictionary: &[String]) -> String {
    let mut log = String::with_capacity(bytes + 512);
    let mut line = 0u64;
    while log.len() < bytes {
        line += 1;
        let (day, second) = (1 + rng.below(28), rng.below(86_400));
        log.push_str(&format!(
            "2024-{:02}-{day:02} {:02}:{:02}:{:02}.{:03} {} {}::{}: ",
            1 + rng.below(12),
            second / 3600,
            second / 60 % 60,
            second % 60,
            rng.below(1000),
            LEVELS[rng.below(4)],
            WORDS[20 + rng.below(12)],
            dictionary[rng.below(dictionary.len() as u64)],
        ));
        for _ in 0..4 + rng.below(12) {
            let word = match rng.below(4) {
                0 => &dictionary[rng.below(dictionary.len() as u64)],
                _ => WORDS[rng.below(WORDS.len() as u64)],
            };
            log.push_str(word);
            log.push(' ');
        }
        let field = rng.below(8);
        let number = rng.next() >> 40;
        match field {
            0 => log.push_str(&format!("user {}.{number}@example{}.org", WORDS[rng.below(12)], rng.below(9))),
            1 => log.push_str(&format!(
                "from 10.{}.{}.{} {} /api/v1/{}?id={number} HTTP/1.1",
                rng.below(256),
                rng.below(256),
                rng.below(256),
                METHODS[rng.below(4)],
                WORDS[20 + rng.below(12)],
            )),
            2 => log.push_str(&format!("see https://docs.example.org/{}/{number}#top", WORDS[rng.below(12)])),
            3 => log.push_str(&format!("id={line} retries={} took {}ms", rng.below(5), rng.below(5000))),
            4 => log.push_str(&format!("at 0x{number:x} \"{}\"", WORDS[rng.below(WORDS.len() as u64)])),
            5 => log.push_str(&format!(
                "trace {:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                rng.next() as u32,
                rng.next() as u16,
                rng.next() as u16,
                rng.next() as u16,
                rng.next() >> 16,
            )),
            6 => log.push_str(&format!("ratio={}.{:02}  value={number}", rng.below(100), rng.below(100))),
            _ => log.push_str("connection timed out"),
        }
        log.push('\n');
    }
    log
}

/// One pass over a part of the log with freshly compiled patterns: every match of every pattern, every capture
/// group of the patterns that have them, the lines a set of the patterns matches, and a rewrite of the dates.
fn search(patterns: &[String], part: &str) -> u64 {
    let compiled: Vec<Regex> =
        patterns.iter().map(|pattern| Regex::new(pattern).expect("a pattern that compiles")).collect();
    let set = RegexSet::new(LINE_KINDS.map(|index| &patterns[index])).expect("patterns that compile");
    let mut checksum = 0u64;
    for regex in &compiled {
        if regex.captures_len() > 1 {
            for captures in regex.captures_iter(part) {
                let lengths = captures.iter().flatten().map(|group| group.len() as u64);
                checksum = lengths.fold(checksum.wrapping_add(1), u64::wrapping_add);
            }
        } else {
            for found in regex.find_iter(part) {
                checksum = checksum.wrapping_add(1 + found.len() as u64);
            }
        }
    }
    for line in part.lines() {
        checksum = set.matches(line).iter().fold(checksum, |checksum, index| checksum.wrapping_add(index as u64));
    }
    let rewritten = compiled[DATES].replace_all(part, "$3/$2/$1");
    checksum.wrapping_add(black_box(rewritten).len() as u64)
}

/// Builds a dictionary of 1000 words and a log of about `bytes` bytes, then searches the log in `parts` parts, each
/// with the patterns compiled afresh: `PATTERNS` and two alternations of the whole dictionary, one of them
/// case-insensitive.
pub fn regex_search(bytes: usize, parts: usize, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let dictionary = dictionary(&mut rng, 1000);
    let log = log(&mut rng, bytes, &dictionary);
    let alternation = dictionary.join("|");
    let mut patterns: Vec<String> = PATTERNS.iter().map(|pattern| (*pattern).to_owned()).collect();
    patterns.push(format!(r"\b(?:{alternation})\b"));
    // Without word boundaries: with them, the lazy DFA of this pattern, which no prefilter narrows, would give up on
    // every line that is not ASCII and leave the search to the much slower PikeVM.
    patterns.push(format!(r"(?i)(?:{alternation})"));

    let mut checksum = log.len() as u64;
    let mut start = 0;
    for part in 0..parts {
        let mut end = if part + 1 == parts { log.len() } else { log.len() * (part + 1) / parts };
        while !log.is_char_boundary(end) {
            end += 1;
        }
        checksum = checksum.wrapping_add(search(&patterns, &log[start..end]));
        start = end;
    }
    checksum
}
