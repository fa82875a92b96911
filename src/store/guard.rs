//! The scope guard's judgement (issue 16; README, "The scope guard"): whether a `global` write
//! is really about the place it was said in. Deterministic — cue words, the places a database
//! knows, and what the same message wrote elsewhere — and explained: every signal becomes one
//! sentence of evidence. No SQL here; the write path gathers the [`Evidence`] and acts on the
//! [`Verdict`].

use crate::model::Scope;
use crate::spelling::fold;
use aho_corasick::AhoCorasick;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;
use unicode_width::UnicodeWidthStr;

/// The cue lists memscope ships (`assets/scope_cues.json`).
pub const DEFAULT_CUES: &str = include_str!("../../assets/scope_cues.json");

/// Words that tie a statement to the place it was said in, and words that state a default.
#[derive(Debug, Clone)]
pub struct Cues {
    pub place: Vec<String>,
    pub default: Vec<String>,
    /// Both lists folded (`spelling::fold`), in one automaton: a text is read once, however
    /// many cues there are (the suspects scan reads every global record).
    matcher: Option<AhoCorasick>,
    folded: Vec<String>,
    /// Place ids that are everyday words (`docs`, `api`, `test`), folded: named only where the
    /// words mark them as a place ([`marked_as_place`]).
    everyday: HashSet<String>,
}

#[derive(Deserialize)]
struct CueLists {
    place: Vec<String>,
    default: Vec<String>,
    #[serde(default)]
    everyday_ids: Vec<String>,
}

impl Cues {
    pub fn new(place: Vec<String>, default: Vec<String>) -> Cues {
        let folded: Vec<String> = place.iter().chain(&default).map(|c| fold(c)).collect();
        let matcher = AhoCorasick::new(&folded).ok();
        Cues {
            place,
            default,
            matcher,
            folded,
            everyday: HashSet::new(),
        }
    }

    /// These cues, with `ids` as the place ids that are everyday words.
    fn with_everyday_ids(mut self, ids: &[String]) -> Cues {
        self.everyday = ids.iter().map(|id| fold(id)).collect();
        self
    }

    /// The shipped lists, parsed once.
    pub fn shipped() -> &'static Cues {
        static CUES: OnceLock<Cues> = OnceLock::new();
        CUES.get_or_init(|| {
            // The asset is part of the build and tested (`the_shipped_cues_parse`).
            let lists: CueLists = serde_json::from_str(DEFAULT_CUES).unwrap_or(CueLists {
                place: Vec::new(),
                default: Vec::new(),
                everyday_ids: Vec::new(),
            });
            Cues::new(lists.place, lists.default).with_everyday_ids(&lists.everyday_ids)
        })
    }

    /// The cues found in folded `text`, each once, as indices into both lists (place cues
    /// first), in list order.
    fn hits(&self, text: &str) -> Vec<usize> {
        let Some(m) = &self.matcher else {
            return Vec::new();
        };
        // Allocated at the first cue found: most words have none.
        let mut hit: Vec<bool> = Vec::new();
        for found in m.find_overlapping_iter(text) {
            let i = found.pattern().as_usize();
            if hit.get(i) != Some(&true)
                && bounded(text, found.start(), found.end(), &self.folded[i])
            {
                hit.resize(self.folded.len(), false);
                hit[i] = true;
            }
        }
        (0..hit.len()).filter(|&i| hit[i]).collect()
    }

    /// The place cues and the default cues of `hits`.
    fn split(&self, hits: &[usize]) -> (Vec<&str>, Vec<&str>) {
        let n = self.place.len();
        let cue = |i: usize| match i.checked_sub(n) {
            None => self.place.get(i),
            Some(d) => self.default.get(d),
        };
        let pick = |place: bool| -> Vec<&str> {
            hits.iter()
                .filter(|&&i| (i < n) == place)
                .filter_map(|&i| cue(i).map(String::as_str))
                .collect()
        };
        (pick(true), pick(false))
    }
}

/// What a write's words say before anything is looked up: the words folded and the shipped cues
/// found in them. A pure function of the text, so the `apply` pipeline reads it on its parse
/// thread, off the writer's path.
#[derive(Debug, Clone)]
pub struct Words {
    folded: String,
    /// Indices into the shipped cue lists (`Cues::hits`).
    hits: Vec<usize>,
    /// Where the id-like tokens stand in `folded` that may name a known place
    /// (`Places::named_in`): those of three characters or more, and shorter ones written as a
    /// scope (`repo:ab`).
    tokens: Vec<std::ops::Range<usize>>,
}

impl Words {
    /// `raw` read with the shipped cues.
    pub fn read(raw: &str) -> Words {
        Words::read_with(Cues::shipped(), raw)
    }

    fn read_with(cues: &Cues, raw: &str) -> Words {
        let folded = squeeze_spaces(fold(raw));
        let hits = cues.hits(&folded);
        let mut tokens = Vec::new();
        let mut start = None;
        let end = std::iter::once((folded.len(), ' '));
        for (i, c) in folded.char_indices().chain(end) {
            match (is_id_char(c), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    start = None;
                    let part = &folded[s..i];
                    let edge = |c: char| matches!(c, '.' | '/' | '-' | '_');
                    let token = part.trim_matches(edge);
                    let lead = part.len() - part.trim_start_matches(edge).len();
                    let at = s + lead..s + lead + token.len();
                    if !token.is_empty()
                        && (named_bare(token) || kind_written_before(&folded, at.start).is_some())
                    {
                        tokens.push(at);
                    }
                }
                _ => {}
            }
        }
        Words {
            folded,
            hits,
            tokens,
        }
    }

    /// What a backend that looks the known places up, instead of holding them all, asks for:
    /// every place [`Places::named_in`] could find in these words is one whose folded id is
    /// one of these tokens (an id made of [`is_id_char`]s only: a place `Places` keeps by
    /// token) or else stands in [`Words::folded`] (any other id). A [`Places`] of those alone
    /// names in these words exactly what one of every known place does.
    pub fn tokens(&self) -> impl Iterator<Item = &str> {
        self.tokens.iter().map(|at| &self.folded[at.clone()])
    }

    /// The words folded (`spelling::fold`), as [`Places::named_in`] reads them.
    pub fn folded(&self) -> &str {
        &self.folded
    }
}

/// Words as the cues are written: every run of white space (line breaks, tabs, two spaces) one
/// space, and none between two Chinese characters, which Chinese writes without (found by an
/// exploratory test: `this  repo`, `this⏎repo` and `这个 仓库` passed a cue their single-spaced
/// form met). Words needing none of it come back as they are.
fn squeeze_spaces(folded: String) -> String {
    let cjk = |c: char| matches!(c, '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}');
    let mut prev: Option<char> = None;
    let mut changes = false;
    let mut run = 0;
    for c in folded.chars() {
        if c.is_whitespace() {
            run += 1;
            changes |= c != ' ' || run > 1 || prev.is_none_or(cjk);
        } else {
            changes |= run > 0 && cjk(c);
            run = 0;
        }
        prev = Some(c);
    }
    if !changes && run == 0 {
        return folded;
    }
    let mut out = String::with_capacity(folded.len());
    let mut last: Option<char> = None;
    let mut space = false;
    for c in folded.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && last.is_some_and(|l| !(cjk(l) && cjk(c))) {
            out.push(' ');
        }
        space = false;
        out.push(c);
        last = Some(c);
    }
    out
}

/// FNV-1a, for the short ids the guard looks up once per word of every global write (the
/// standard hasher is built to resist chosen keys; these keys are the database's own places).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The repository and task ids a database knows, ready to be looked for in words.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// ASCII ids (folded) → their place: found by splitting the words into id-like tokens.
    /// (A repository and a task may share an id: both are kept.)
    by_token: HashMap<String, Vec<Scope>, BuildHasherDefault<Fnv>>,
    /// Other ids (folded), looked for one by one.
    others: Vec<(String, Scope)>,
}

impl Places {
    pub fn new<'a>(places: impl IntoIterator<Item = &'a Scope>) -> Places {
        let mut p = Places::default();
        for place in places {
            p.add(place);
        }
        p
    }

    /// One more place the database knows.
    pub fn add(&mut self, place: &Scope) {
        let id = match place {
            Scope::Repo(id) | Scope::Task(id) => fold(id),
            Scope::Global => return,
        };
        // Short ids (`ui`, `db`, `库`) are kept too: written as a scope (`repo:ui`) they name
        // their place ([`named_bare`]).
        if id.is_empty() {
            return;
        }
        if id.chars().all(is_id_char) {
            let places = self.by_token.entry(id).or_default();
            if !places.contains(place) {
                places.push(place.clone());
            }
        } else if !self.others.iter().any(|(_, p)| p == place) {
            self.others.push((id, place.clone()));
        }
    }

    /// The places folded `text` names: first the place the write was made in (`here`, which
    /// the database may not know yet), then the known ones, each once; ids split into tokens
    /// are found in the order the words give them. The words are split once for both. An id
    /// in `everyday` (`docs`, `api`) names its place only where the words mark it as one; a
    /// short id ([`named_bare`]) only where it is written as a scope (`repo:ab`); an id found
    /// only inside a longer one the words name (`前端` in `前端框架`) names nothing.
    fn named_in(
        &self,
        words: &Words,
        here: Option<&Context>,
        everyday: &HashSet<String>,
    ) -> Vec<Scope> {
        let text = words.folded.as_str();
        // `here`'s places with their ids as `Places::new` keeps them: of an id made of tokens
        // the first place only. An id made of tokens (ASCII) is compared with the folded words
        // without case, so it need not be folded itself; its place is made only when the
        // words name it (most never do).
        let mut own: [Option<Own<'_>>; 2] = [None, None];
        if let Some(ctx) = here {
            let given = [(ctx.repo.as_deref(), true), (ctx.task.as_deref(), false)];
            for (slot, (id, repo)) in given.into_iter().enumerate() {
                let Some(id) = id else { continue };
                let token = id.chars().all(is_id_char);
                let key: Cow<'_, str> = if token {
                    Cow::Borrowed(id)
                } else {
                    Cow::Owned(fold(id))
                };
                let seen = own
                    .iter()
                    .flatten()
                    .any(|o| o.key.eq_ignore_ascii_case(&key));
                if !(key.is_empty() || (token && seen)) {
                    own[slot] = Some(Own {
                        key,
                        id,
                        repo,
                        token,
                    });
                }
            }
        }
        // Every mention found, in the order the places are named: the write's own places
        // first (its tokens, then its other id), then the known ones (by token in the words'
        // order, then the others in theirs). Allocated at the first: most words name none.
        let mut found: Vec<Mention> = Vec::new();
        let own_tokens = own.iter().flatten().any(|o| o.token);
        if own_tokens || !self.by_token.is_empty() {
            for at in &words.tokens {
                let token = &text[at.clone()];
                let mine = own
                    .iter()
                    .flatten()
                    .find(|o| o.key.eq_ignore_ascii_case(token));
                let theirs = self.by_token.get(token);
                // Looked up only for a token that is a place's id: most are not.
                if mine.is_none() && theirs.is_none() {
                    continue;
                }
                // `repo:test` and `task:test` name one kind; a bare `test` names both.
                let kind = kind_written_before(text, at.start);
                if kind.is_none() && !named_bare(token) {
                    continue;
                }
                if everyday.contains(token) && !marked_as_place(text, at.clone()) {
                    continue;
                }
                if let Some(o) = mine {
                    found.push(Mention::own(at, o.place()));
                }
                for place in theirs.into_iter().flatten() {
                    if fits(kind, place) {
                        found.push(Mention::known(at, place.clone()));
                    }
                }
            }
        }
        // Ids not made of tokens (Chinese ones): by the same rules, an everyday word (`前端`,
        // `文档`) included.
        let names = |id: &str, at: &std::ops::Range<usize>, kind: Option<bool>| {
            (kind.is_some() || named_bare(id))
                && (!everyday.contains(id) || marked_as_place(text, at.clone()))
        };
        for o in own.iter().flatten().filter(|o| !o.token) {
            for at in mentions(text, &o.key) {
                if names(&o.key, &at, kind_written_before(text, at.start)) {
                    found.push(Mention::own(&at, o.place()));
                }
            }
        }
        for (id, place) in &self.others {
            for at in mentions(text, id) {
                let kind = kind_written_before(text, at.start);
                if fits(kind, place) && names(id, &at, kind) {
                    found.push(Mention::known(&at, place.clone()));
                }
            }
        }
        let mut named: Vec<Scope> = Vec::new();
        for own in [true, false] {
            for m in found.iter().filter(|m| m.own == own) {
                let inside = found.iter().any(|o| {
                    o.at.start <= m.at.start && m.at.end <= o.at.end && o.at.len() > m.at.len()
                });
                if !inside && !named.contains(&m.place) {
                    named.push(m.place.clone());
                }
            }
        }
        named
    }
}

/// Where the words mention a place, and whether it is the place the write was made in.
struct Mention {
    at: std::ops::Range<usize>,
    place: Scope,
    own: bool,
}

impl Mention {
    fn own(at: &std::ops::Range<usize>, place: Scope) -> Mention {
        Mention {
            at: at.clone(),
            place,
            own: true,
        }
    }

    fn known(at: &std::ops::Range<usize>, place: Scope) -> Mention {
        Mention {
            at: at.clone(),
            place,
            own: false,
        }
    }
}

/// Whether `place` is of the kind an id was written with (`Some(true)` for `repo:ID`,
/// `Some(false)` for `task:ID`, `None` for a bare id: any).
fn fits(kind: Option<bool>, place: &Scope) -> bool {
    kind.is_none_or(|repo| matches!(place, Scope::Repo(_)) == repo)
}

/// Whether an id is specific enough to name its place bare, without `repo:`/`task:` before it:
/// three columns or more as a terminal shows it — three ASCII characters (`web`, not `ui`),
/// or two Chinese ones (`文档`, not `库`), a wide character counting two. Shorter ids are words
/// of every sentence.
fn named_bare(id: &str) -> bool {
    UnicodeWidthStr::width(id) >= 3
}

/// A place a write was made in, as `Places::named_in` looks for it.
struct Own<'a> {
    /// The id as compared with the words.
    key: Cow<'a, str>,
    id: &'a str,
    repo: bool,
    /// Whether the id is made of tokens (found among the words' tokens).
    token: bool,
}

impl Own<'_> {
    fn place(&self) -> Scope {
        if self.repo {
            Scope::Repo(self.id.to_string())
        } else {
            Scope::Task(self.id.to_string())
        }
    }
}

/// The characters of an id [`Places`] finds as a token of the words. PostgreSQL's index of the
/// places found otherwise (`spellings_other_places`, schema 11) states the same set as a
/// pattern: a change here changes it there.
fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

/// The place a write was made in: where the agent worked when it heard the words (not the
/// scope it chose).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub repo: Option<String>,
    pub task: Option<String>,
}

/// What the write path knows about one write beside its scope.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    /// The user's words.
    pub raw: Option<&'a str>,
    /// The same words already read (`Words::read`), when the caller has them.
    pub words: Option<&'a Words>,
    pub context: Option<&'a Context>,
    /// Repository and task scopes the database knows (their ids may appear in the words).
    pub known_places: &'a Places,
    /// (predicate, scope) of the scoped records the same source (the same message) wrote.
    pub siblings: &'a [(String, Scope)],
}

/// How the guard acts on a suspect `global` write (setting `scope_guard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardMode {
    /// With a context: queue it for a human; without one: apply it and mark it a suspect.
    Queue,
    /// Apply it and mark it a suspect.
    Flag,
    Off,
}

impl GuardMode {
    pub fn parse(text: &str) -> Option<GuardMode> {
        match text {
            "queue" => Some(GuardMode::Queue),
            "flag" => Some(GuardMode::Flag),
            "off" => Some(GuardMode::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GuardMode::Queue => "queue",
            GuardMode::Flag => "flag",
            GuardMode::Off => "off",
        }
    }
}

/// What the guard makes of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Apply,
    /// Not applied: pending between these candidates, for the reasons given.
    Queue {
        candidates: Vec<Scope>,
        evidence: Vec<String>,
    },
    /// Applied, and recorded as a suspect with its evidence and the places it points at (a
    /// rescope target first).
    Suspect {
        evidence: Vec<String>,
        places: Vec<Scope>,
    },
}

/// The signals in one write, each as a sentence, and the places they point at.
#[derive(Debug, Default)]
struct Signals {
    place: Vec<String>,
    default: Vec<String>,
    places: Vec<Scope>,
}

/// Judges a write to `scope`: only a `global` write is guarded. A place signal — a place cue
/// in the words, a known repository or task named in them, a sibling record — makes it
/// suspect; words that state a default alone never do (with a place signal too, the write is
/// ambiguous, which is also a question for a human).
pub fn judge(cues: &Cues, scope: &Scope, ev: &Evidence<'_>, mode: GuardMode) -> Verdict {
    if *scope != Scope::Global || mode == GuardMode::Off {
        return Verdict::Apply;
    }
    let mut s = signals(cues, ev);
    if s.place.is_empty() {
        return Verdict::Apply;
    }
    let mut evidence = std::mem::take(&mut s.place);
    if !s.default.is_empty() {
        evidence.push(format!(
            "they also state a default ({}), so the scope is ambiguous",
            s.default.join(", ")
        ));
    }
    match ev.context {
        // The place the write was made in comes first: queued as a candidate, or (`flag`)
        // kept with the mark, so the suspects scan can suggest it.
        Some(ctx) => {
            let mut candidates = vec![Scope::Global];
            let here = [
                ctx.repo.clone().map(Scope::Repo),
                ctx.task.clone().map(Scope::Task),
            ];
            for place in here.into_iter().flatten().chain(s.places.iter().cloned()) {
                let key = fold(&place.to_string());
                if !candidates.iter().any(|c| fold(&c.to_string()) == key) {
                    candidates.push(place);
                }
            }
            if candidates.len() < 2 || mode != GuardMode::Queue {
                return Verdict::Suspect {
                    evidence,
                    places: candidates.split_off(1),
                };
            }
            Verdict::Queue {
                candidates,
                evidence,
            }
        }
        None => Verdict::Suspect {
            evidence,
            places: s.places,
        },
    }
}

/// [`judge`] of a global write that does not say where it was made: its words alone, with no
/// known place and no sibling (README, "The scope guard": it costs no lookup). Never `Queue`,
/// and a suspect's places are the ones its words name among none: always empty.
pub fn judge_words(raw: Option<&str>, words: Option<&Words>, mode: GuardMode) -> Verdict {
    let ev = Evidence {
        raw,
        words,
        context: None,
        known_places: &Places::default(),
        siblings: &[],
    };
    judge(Cues::shipped(), &Scope::Global, &ev, mode)
}

fn signals(cues: &Cues, ev: &Evidence<'_>) -> Signals {
    let mut s = Signals::default();
    // Words read ahead were read with the shipped cues; others are read here.
    let ahead = ev.words.filter(|_| std::ptr::eq(cues, Cues::shipped()));
    let read = match ahead {
        Some(_) => None,
        None => ev.raw.map(|raw| Words::read_with(cues, raw)),
    };
    if let Some(words) = read.as_ref().or(ahead) {
        let quote = |found: Vec<&str>| -> Vec<String> {
            found.into_iter().map(|cue| format!("“{cue}”")).collect()
        };
        let hits = &words.hits;
        let (place, default) = cues.split(hits);
        if !place.is_empty() {
            s.place
                .push(format!("the words say {}", quote(place).join(", ")));
        }
        s.default = quote(default);
        // A known place named in the words: the context's own, or any the database holds.
        let named = ev.known_places.named_in(words, ev.context, &cues.everyday);
        for place in &named {
            s.place.push(format!("the words name {place}"));
        }
        s.places.extend(named);
    }
    // The message's other records point at a place only when they name no two places of one
    // kind — a repository and a task in it are where one message was said, two repositories
    // are not (found by review: a global default beside rules of two repositories was a
    // suspect, and its rescope went to the first).
    let scoped: Vec<&(String, Scope)> = (ev.siblings.iter())
        .filter(|(_, p)| *p != Scope::Global)
        .collect();
    let kind = std::mem::discriminant::<Scope>;
    let one_place = scoped.iter().enumerate().all(|(i, (_, a))| {
        scoped[i + 1..]
            .iter()
            .all(|(_, b)| a == b || kind(a) != kind(b))
    });
    if one_place {
        for (predicate, place) in scoped {
            s.place
                .push(format!("the same message wrote {predicate} in {place}"));
            if !s.places.contains(place) {
                s.places.push(place.clone());
            }
        }
    }
    s
}

/// Words next to a place id that say it is one: `the docs repo`, `repo docs`, `docs 仓库`.
const PLACE_NOUNS: [&str; 11] = [
    "repo",
    "repos",
    "repository",
    "repositories",
    "project",
    "projects",
    "codebase",
    "monorepo",
    "service",
    "services",
    // Singular only: "run test tasks in parallel" speaks of tasks of a kind, not of one.
    "task",
];
const PLACE_NOUNS_CJK: [&str; 6] = ["仓库", "项目", "代码库", "工程", "服务", "任务"];
/// Words before `ID 项目` (or another of [`PLACE_NOUNS_CJK`]) that make it any such place, not
/// the one — Chinese has no article: `新建前端项目` (a new frontend project), `所有前端项目`.
const ANY_ONE_CJK: [&str; 18] = [
    "新建", "新开", "创建", "新的", "一个", "每个", "各个", "所有", "任何", "其他", "别的", "这类",
    "一些", "某个", "任意", "各种", "多个", "几个",
];
/// The entries of [`ANY_ONE_CJK`] that are verbs: `的` after one makes a clause about one place
/// (`我刚创建的前端项目`, the project I just created), not a determiner.
const ANY_ONE_CJK_VERBS: [&str; 3] = ["新建", "新开", "创建"];
/// Longer words that end in one of [`ANY_ONE_CJK`] and name the one place after all (同一个 the
/// same, 第一个 the first, 最新的 the newest, 重新创建 recreate …).
const NOT_ANY_ONE_CJK: [&str; 16] = [
    "同一个",
    "第一个",
    "这一个",
    "那一个",
    "唯一一个",
    "最新的",
    "更新的",
    "重新创建",
    "重新开",
    "特别的",
    "个别的",
    "级别的",
    "区别的",
    "类别的",
    "识别的",
    "分别的",
];
/// Words that start with one of [`PLACE_NOUNS_CJK`] without being a place (工程师 engineer,
/// 服务器 server …).
const NOT_PLACE_NOUNS_CJK: [&str; 7] = [
    "工程师",
    "工程化",
    "服务器",
    "服务端",
    "服务商",
    "项目经理",
    "任务栏",
];

/// Characters that make a compound of an everyday id written right after them — 微前端 (micro
/// frontend), 元数据 (metadata), 大数据 (big data), 跨端, 纯前端 (pure frontend) — so that
/// `微前端项目` speaks of a kind of project, not of the place `前端`. (Not 新: 更新前端项目,
/// updating the frontend project, names it; nor 全: 全前端仓库, the whole frontend repository.)
const COMPOUND_PREFIXES_CJK: [char; 11] = [
    '微', '元', '大', '纯', '跨', '伪', '泛', '多', '单', '双', '子',
];
/// Words that end in one of [`COMPOUND_PREFIXES_CJK`] and leave the id after them a place of its
/// own: a verb and 大 (调大后端服务的超时, turn up the backend service's timeout), 最大.
const NOT_COMPOUND_CJK: [&str; 7] = ["调大", "加大", "扩大", "增大", "放大", "变大", "最大"];

/// Whether the words before an id end in one that makes `ID 项目` any such place
/// ([`ANY_ONE_CJK`]; `所有的` as `所有`, but not `创建的`), and not in a longer word that does
/// not ([`NOT_ANY_ONE_CJK`]).
fn any_one_cjk(before: &str) -> bool {
    let ends = |b: &str| {
        ANY_ONE_CJK.iter().any(|w| b.ends_with(w))
            && !NOT_ANY_ONE_CJK.iter().any(|w| b.ends_with(w))
    };
    ends(before)
        || before.strip_suffix('的').is_some_and(|plain| {
            ends(plain) && !ANY_ONE_CJK_VERBS.iter().any(|v| plain.ends_with(v))
        })
}

/// `在 ID 里` ("in ID"): the id between `在` and one of these is a place too.
const INSIDE_CJK: [&str; 4] = ["里", "中", "内", "下"];
/// Words that end in `在` without meaning "in" (现在 now, 正在 in progress, 存在 stored …):
/// the character before it. (不在, "not in", still names the place.)
const NOT_IN_CJK: [char; 12] = [
    '现', '正', '存', '实', '所', '好', '自', '内', '外', '潜', '旨', '意',
];
/// Words that start with one of [`INSIDE_CJK`] without meaning "inside" (内存 memory, 中文
/// Chinese, 下载 download …).
const NOT_INSIDE_CJK: [&str; 10] = [
    "内存", "内容", "中文", "中心", "下载", "下次", "下午", "下周", "里程", "中午",
];
/// Words before an id that make `ID repo` any such place, not the one: `a test repo`.
const ANY_ONE: [&str; 6] = ["a", "an", "any", "every", "each", "another"];

/// The kind an id at `start` of folded `text` is written with, as a scope: `Some(true)` for
/// `repo:ID`, `Some(false)` for `task:ID`, `None` for a bare id (`myrepo:ID` included). Folded
/// words spell the scope in lower case with an ASCII colon (`Repo：文档` folds to `repo:文档`).
fn kind_written_before(text: &str, start: usize) -> Option<bool> {
    let before = &text[..start];
    let kind = if let Some(rest) = before.strip_suffix("repo:") {
        (true, rest)
    } else if let Some(rest) = before.strip_suffix("task:") {
        (false, rest)
    } else {
        return None;
    };
    let glued = kind.1.chars().next_back().is_some_and(is_id_char);
    (!glued).then_some(kind.0)
}

/// Whether the id at `at` of folded `text` is marked as a place: written as a scope
/// (`repo:docs`, `task:docs`), beside a place noun (`the docs repo`, `in repo docs`,
/// `docs 仓库`, `the test task`) or inside `在 … 里` (`在 docs 里`) with nothing between them but
/// spaces and quotes — a period or a comma ends
/// the phrase — and not after an article that makes it any such place (`a test repo`, in
/// Chinese `新建前端项目`: [`ANY_ONE_CJK`]) nor the end of a compound (`微前端项目`:
/// [`COMPOUND_PREFIXES_CJK`]). An id
/// that is an everyday word counts as named only so: "write docs in English" names no
/// repository.
fn marked_as_place(text: &str, at: std::ops::Range<usize>) -> bool {
    if kind_written_before(text, at.start).is_some() {
        return true;
    }
    let before = &text[..at.start];
    let gap = |c: char| {
        c.is_whitespace() || matches!(c, '`' | '\'' | '"' | '“' | '”' | '‘' | '’' | '「' | '」')
    };
    let word = |c: char| c.is_ascii_alphanumeric();
    let before = before.trim_end_matches(gap);
    let previous = &before[before.trim_end_matches(word).len()..];
    let ahead = before[..before.len() - previous.len()].trim_end_matches(gap);
    let article = &ahead[ahead.trim_end_matches(word).len()..];
    let after = text[at.end..].trim_start_matches(gap);
    let next = &after[..after.len() - after.trim_start_matches(word).len()];
    let noun = |w: &str| PLACE_NOUNS.contains(&w);
    (noun(next) && !ANY_ONE.contains(&previous))
        || (noun(previous) && !ANY_ONE.contains(&article))
        || (PLACE_NOUNS_CJK.iter().any(|n| after.starts_with(n))
            && !NOT_PLACE_NOUNS_CJK.iter().any(|w| after.starts_with(w))
            && !any_one_cjk(before)
            && !in_compound_cjk(&text[..at.start], &text[at]))
        || in_cjk(before, after)
}

/// Whether an id in a script without spaces is the end of a compound ([`COMPOUND_PREFIXES_CJK`]
/// right before it).
fn in_compound_cjk(before: &str, id: &str) -> bool {
    id.chars().next().is_some_and(unspaced)
        && before
            .chars()
            .next_back()
            .is_some_and(|c| COMPOUND_PREFIXES_CJK.contains(&c))
        && !NOT_COMPOUND_CJK.iter().any(|w| before.ends_with(w))
}

/// Whether an id stands inside `在 … 里` (or 中, 内, 下): `before` ends with a `在` that is not
/// the end of another word, and `after` starts with one of them that does not start another.
fn in_cjk(before: &str, after: &str) -> bool {
    let Some(rest) = before.strip_suffix('在') else {
        return false;
    };
    !rest.ends_with(NOT_IN_CJK)
        && INSIDE_CJK.iter().any(|n| after.starts_with(n))
        && !NOT_INSIDE_CJK.iter().any(|w| after.starts_with(w))
}

/// Whether a cue found at `start..end` of folded `text` stands as itself: anywhere for a cue
/// in a script without spaces, as whole words for one that starts or ends with an ASCII letter
/// or digit (`this repo` is not in `this repository`, `default` not in `defaults`).
fn bounded(text: &str, start: usize, end: usize, cue: &str) -> bool {
    let worded = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let needs_bounds = worded(cue.chars().next()) || worded(cue.chars().last());
    !needs_bounds
        || (!worded(text[..start].chars().next_back()) && !worded(text[end..].chars().next()))
}

/// A cue in folded text (for tests of the bounds rule).
#[cfg(test)]
fn contains_cue(text: &str, cue: &str) -> bool {
    text.match_indices(cue)
        .any(|(i, _)| bounded(text, i, i + cue.len(), cue))
}

/// Where an id stands in folded text as an id of its own, not inside a longer one: each edge
/// of the id is bounded by its own rule. An edge in a script written without spaces (Chinese,
/// Japanese) needs no boundary — `后端服务` stands in `后端服务用 yarn` — and any other edge
/// must not touch a letter, digit, `-` or `_` of a script with spaces (`web-app` is not in
/// `web-app-v2`, `web前端` is in `用web前端`).
fn mentions<'t>(text: &'t str, id: &'t str) -> impl Iterator<Item = std::ops::Range<usize>> + 't {
    let part = |c: Option<char>| {
        c.is_some_and(|c| (c.is_alphanumeric() && !unspaced(c)) || c == '-' || c == '_')
    };
    let open_before = id.chars().next().is_some_and(unspaced);
    let open_after = id.chars().next_back().is_some_and(unspaced);
    // Overlapping matches too: a match refused at its edges may overlap one that stands.
    let mut from = 0;
    std::iter::from_fn(move || {
        while !id.is_empty() {
            let i = from + text.get(from..)?.find(id)?;
            from = i + text[i..].chars().next().map_or(1, char::len_utf8);
            let end = i + id.len();
            if (open_before || !part(text[..i].chars().next_back()))
                && (open_after || !part(text[end..].chars().next()))
            {
                return Some(i..end);
            }
        }
        None
    })
}

/// Characters of the scripts written without spaces between words — Chinese, Japanese kana,
/// Bopomofo — where a neighbouring character is no word boundary.
fn unspaced(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'     // Hiragana, Katakana
        | '\u{3100}'..='\u{312F}'   // Bopomofo
        | '\u{31F0}'..='\u{31FF}'   // Katakana phonetic extensions
        | '\u{3400}'..='\u{4DBF}'   // CJK extension A
        | '\u{4E00}'..='\u{9FFF}'   // CJK unified ideographs
        | '\u{F900}'..='\u{FAFF}'   // CJK compatibility ideographs
        | '\u{20000}'..='\u{323AF}' // CJK extensions B–H
    )
}

/// An id in folded text, as the guard finds one (for tests of the bounds rule).
#[cfg(test)]
fn contains_id(text: &str, id: &str) -> bool {
    mentions(text, id).next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn repo(id: &str) -> Scope {
        Scope::Repo(id.into())
    }

    /// Line-wrapped or doubly spaced words meet the cues their single-spaced form meets.
    #[test]
    fn white_space_runs_and_spaces_inside_chinese_meet_the_cues() {
        for (plain, spaced) in [
            ("this repo uses yarn", "this  repo uses yarn"),
            ("this repo uses yarn", "this\nrepo uses yarn"),
            ("this repo uses yarn", " this \t repo\r\nuses yarn "),
            ("这个仓库用 yarn", "这个 仓库用 yarn"),
            ("这个仓库用 yarn", "这个\n仓库用\u{3000}yarn"),
        ] {
            let (a, b) = (Words::read(plain), Words::read(spaced));
            assert!(!a.hits.is_empty(), "{plain:?} meets a cue");
            assert_eq!(a.hits, b.hits, "{spaced:?}");
            assert_eq!(a.folded, b.folded, "{spaced:?}");
        }
        // Words needing nothing stay as they are; a space between Latin words stays.
        assert_eq!(squeeze_spaces("用 npm ci 吧".into()), "用 npm ci 吧");
        assert_eq!(squeeze_spaces("a b".into()), "a b");
    }

    #[test]
    fn the_seed_incident_is_queued_with_its_evidence() {
        let ev = Evidence {
            raw: Some("这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。"),
            words: None,
            context: Some(&Context {
                repo: Some("legacy-dashboard".into()),
                task: None,
            }),
            known_places: &Places::default(),
            siblings: &[],
        };
        match judge(Cues::shipped(), &Scope::Global, &ev, GuardMode::Queue) {
            Verdict::Queue {
                candidates,
                evidence,
            } => {
                assert_eq!(candidates, [Scope::Global, repo("legacy-dashboard")]);
                assert_eq!(evidence, ["the words say “这个仓库”"]);
            }
            other => panic!("{other:?}"),
        }
        // A scoped write, or the guard off, is never touched.
        assert_eq!(
            judge(Cues::shipped(), &repo("x"), &ev, GuardMode::Queue),
            Verdict::Apply
        );
        assert_eq!(
            judge(Cues::shipped(), &Scope::Global, &ev, GuardMode::Off),
            Verdict::Apply
        );
        // Flag mode, or no context: applied and marked.
        assert!(matches!(
            judge(Cues::shipped(), &Scope::Global, &ev, GuardMode::Flag),
            Verdict::Suspect { .. }
        ));
    }

    #[test]
    fn english_cues_match_whole_words_only() {
        assert!(contains_cue("keep npm in this repo.", "this repo"));
        assert!(!contains_cue("see this repository", "this repo"));
        assert!(!contains_cue("the defaults are fine", "default"));
        assert!(contains_cue("这个仓库用 npm", "这个仓库"));
        assert!(contains_id("we use npm in web-app.", "web-app"));
        assert!(!contains_id("we use npm in web-app-v2", "web-app"));
    }

    #[test]
    fn words_read_ahead_find_the_tokens_a_split_finds() {
        let by_split = |text: &str| -> Vec<String> {
            text.split(|c: char| !is_id_char(c))
                .map(|t| t.trim_matches(|c: char| matches!(c, '.' | '/' | '-' | '_')))
                .filter(|t| t.len() >= 3)
                .map(str::to_string)
                .collect()
        };
        for raw in [
            "run the tests of repo-12 with cargo nextest",
            "这个仓库 legacy-dashboard 用 npm ci。",
            "--web-app-- ./src/ a.b.c __x__ ..",
            "Ünïcödé web_app/v2 😀 émoji-repo",
            "",
            "abc",
            "用户原话：回答用中文",
        ] {
            let words = Words::read(raw);
            let found: Vec<String> = words
                .tokens
                .iter()
                .map(|at| words.folded[at.clone()].to_string())
                .collect();
            assert_eq!(found, by_split(&fold(raw)), "{raw:?}");
        }
    }

    #[test]
    fn an_everyday_id_names_its_place_only_where_the_words_mark_it() {
        let docs = repo("docs");
        let known = Places::new([&docs, &repo("storefront")]);
        let named = |raw: &str| known.named_in(&Words::read(raw), None, &Cues::shipped().everyday);
        for plain in [
            "Always write docs in English",
            "docs first, then code",
            "Keep the docs/ folder flat",
        ] {
            assert_eq!(named(plain), Vec::<Scope>::new(), "{plain}");
        }
        for marked in [
            "repo:docs builds with mkdocs",
            "the docs repo builds with mkdocs",
            "The `docs` repository builds with mkdocs",
            "in repo docs we build with mkdocs",
            "docs 仓库用 mkdocs 构建",
            "docs仓库用 mkdocs",
            "For the docs service, log at debug",
            "the api services use poetry",
            "在 docs 里用 mkdocs 构建",
            "在docs中不要用 yarn",
            "我们在 docs 里用 mkdocs",
            "不在 docs 里用 yarn",
            "in the docs task, skip the linter",
            "docs 任务里先跑测试",
        ] {
            let marked = marked.replace("api", "docs");
            assert_eq!(named(&marked), vec![docs.clone()], "{marked}");
        }
        // A period, a semicolon or a comma ends the phrase; an article makes it any repo.
        for unmarked in [
            "Read the docs. Repo settings are global.",
            "Update the docs; repo owners decide the rest.",
            "In the repo, docs go under /docs",
            "use a docs repo for experiments",
            "create an docs repo first",
            "in a repo docs go first",
            "在写 docs 时用中文",
            "docs 里的例子要能运行",
            "make a docs task for it",
            "run docs tasks in parallel",
            "现在 docs 里的例子要能运行",
            "正在 docs 中的分支不要合并",
            "存在 docs 中的密钥不要提交",
            "在 docs 内存不足时跳过",
            "在 docs 中文档用英文写",
        ] {
            assert_eq!(named(unmarked), Vec::<Scope>::new(), "{unmarked}");
        }
        // A repository and a task of one id: the scope form names its kind, a bare id both.
        let both = Places::new([&repo("flaky"), &Scope::Task("flaky".into())]);
        let named_both =
            |raw: &str| both.named_in(&Words::read(raw), None, &Cues::shipped().everyday);
        assert_eq!(
            named_both("task:flaky needs -x"),
            vec![Scope::Task("flaky".into())]
        );
        assert_eq!(named_both("repo:flaky pins node 18"), vec![repo("flaky")]);
        assert_eq!(named_both("flaky is slow").len(), 2);
        // An id that is not an everyday word is named bare, as before.
        assert_eq!(named("storefront uses yarn"), vec![repo("storefront")]);
        // The place the write was made in, when its id is an everyday word: the same rule.
        let here = Context {
            repo: Some("tests".into()),
            task: None,
        };
        let none = Places::default();
        let named_here =
            |raw: &str| none.named_in(&Words::read(raw), Some(&here), &Cues::shipped().everyday);
        assert_eq!(
            named_here("Always add tests for new code"),
            Vec::<Scope>::new()
        );
        assert_eq!(
            named_here("The tests repo runs pytest -x"),
            vec![repo("tests")]
        );
    }

    #[test]
    fn chinese_ids_and_ids_written_as_scopes_name_their_places() {
        let task = |id: &str| Scope::Task(id.into());
        let known = Places::new([
            &repo("文档"),
            &repo("后端服务"),
            &repo("ab"),
            &repo("abc"),
            &repo("库"),
            &repo("前端"),
            &repo("前端框架"),
            &repo("web前端"),
            &repo("网站🚀"),
            &repo("web-app-v2"),
            &repo("鹊桥"),
            &repo("鹊桥二期"),
            &task("修复依赖"),
        ]);
        let named = |raw: &str| known.named_in(&Words::read(raw), None, &Cues::shipped().everyday);
        for (raw, places) in [
            // Two Chinese characters are specific enough bare; inside unspaced Chinese too.
            ("鹊桥 uses yarn", vec![repo("鹊桥")]),
            ("后端服务用 yarn", vec![repo("后端服务")]),
            ("我们在后端服务里用 yarn", vec![repo("后端服务")]),
            ("修复依赖时别升级 node", vec![task("修复依赖")]),
            // Written as a scope, any id names its place, in any case or colon.
            ("repo:文档 uses yarn", vec![repo("文档")]),
            ("repo:ab uses yarn", vec![repo("ab")]),
            ("Repo：AB uses yarn", vec![repo("ab")]),
            ("在repo:库里用 yarn", vec![repo("库")]),
            ("(repo:ab) uses yarn", vec![repo("ab")]),
            ("abc uses yarn", vec![repo("abc")]),
            // An id inside a longer one the words name is not named; on its own it is.
            ("前端框架用 pnpm", vec![repo("前端框架")]),
            ("鹊桥二期用 pnpm", vec![repo("鹊桥二期")]),
            ("鹊桥用 pnpm", vec![repo("鹊桥")]),
            (
                "鹊桥和鹊桥二期都用 pnpm",
                vec![repo("鹊桥"), repo("鹊桥二期")],
            ),
            // Mixed ids: each edge by its own rule.
            ("用web前端的时候跑 lint", vec![repo("web前端")]),
            ("在网站🚀里用 yarn", vec![repo("网站🚀")]),
            // `web前端` glued to letters is no mention of it; `前端`'s edges are Chinese (an
            // everyday word, named where a place noun marks it).
            ("newweb前端仓库 uses yarn", vec![repo("前端")]),
        ] {
            assert_eq!(named(raw), places, "{raw}");
        }
        for raw in [
            // Short ids bare are words of every sentence.
            "ab uses yarn",
            "这个库用 yarn",
            // The scope form of another kind, or glued to a word, names no known place.
            "task:文档 uses yarn",
            "myrepo:ab uses yarn",
            // An ASCII id inside a longer id, or glued to letters, stands for no place.
            "abcd uses yarn",
            "web-app-v2-beta uses yarn",
        ] {
            assert_eq!(named(raw), Vec::<Scope>::new(), "{raw}");
        }
        // The place the write was made in, by the same rules.
        let none = Places::default();
        let here = |id: &str| Context {
            repo: Some(id.into()),
            task: None,
        };
        let named_here = |raw: &str, id: &str| {
            none.named_in(
                &Words::read(raw),
                Some(&here(id)),
                &Cues::shipped().everyday,
            )
        };
        assert_eq!(named_here("鹊桥里用 yarn", "鹊桥"), vec![repo("鹊桥")]);
        assert_eq!(named_here("文档里用 yarn", "文档"), Vec::<Scope>::new());
        assert_eq!(named_here("在文档里用 yarn", "文档"), vec![repo("文档")]);
        assert_eq!(named_here("repo:ab 用 yarn", "ab"), vec![repo("ab")]);
        assert_eq!(named_here("ab 用 yarn", "ab"), Vec::<Scope>::new());
        assert_eq!(named_here("库里用 yarn", "库"), Vec::<Scope>::new());
    }

    /// A Chinese id that is an everyday word (`前端`, frontend; `文档`, docs) names its place
    /// only where the words mark it as one, as `docs` does (found by review: every sentence
    /// about frontend code was queued in a database that knows a repository called `前端`).
    #[test]
    fn a_chinese_everyday_id_names_its_place_only_where_the_words_mark_it() {
        let (frontend, docs) = (repo("前端"), repo("文档"));
        let known = Places::new([&frontend, &docs, &Scope::Task("测试".into())]);
        let named = |raw: &str| known.named_in(&Words::read(raw), None, &Cues::shipped().everyday);
        for plain in [
            "前端用 pnpm",
            "以后新建前端项目，默认用 pnpm。",
            "所有前端项目都用 pnpm",
            "每个前端仓库都要有 README",
            "写前端代码时用两个空格缩进",
            "文档写中文，代码注释写英文",
            "先写测试再写代码",
            "前端框架一律用 React",
            // Words that start with a place noun, and determiners with 的.
            "前端工程师都用 VS Code",
            "测试服务器用 Ubuntu",
            "所有的前端项目都用 pnpm",
            "任意前端项目都行",
            // The end of a compound: a kind of project, not the place.
            "微前端项目统一用 pnpm",
            "元数据仓库用 Postgres",
            "大数据项目都用 Spark",
            "简单前端项目也要跑 lint",
            "很多前端项目都用 pnpm",
        ] {
            assert_eq!(named(plain), Vec::<Scope>::new(), "{plain}");
        }
        for (marked, place) in [
            ("前端仓库用 pnpm", frontend.clone()),
            ("前端 项目里别用 yarn", frontend.clone()),
            ("更新前端项目时先跑测试", frontend.clone()),
            ("在前端里用 pnpm", frontend.clone()),
            ("repo:前端 用 node 18", frontend.clone()),
            ("“文档”仓库用 mkdocs 构建", docs.clone()),
            ("在文档中不要用 yarn", docs.clone()),
            ("测试任务里先跑 lint", Scope::Task("测试".into())),
            // A longer word that ends like a determiner names the one place.
            ("同一个前端项目里别混用 yarn", frontend.clone()),
            ("重新创建前端仓库时保留 lockfile", frontend.clone()),
            ("更新的前端项目用 pnpm", frontend.clone()),
            // A verb with 的 is a clause about one place: the project I just created.
            ("我刚创建的前端项目用 pnpm", frontend.clone()),
            // A word that only ends like a compound's first character.
            ("调大前端服务的超时到 30s", frontend.clone()),
            ("加大前端服务的内存", frontend.clone()),
            ("全前端仓库统一用 pnpm", frontend.clone()),
            ("重新开前端项目时保留 lockfile", frontend.clone()),
        ] {
            assert_eq!(named(marked), vec![place], "{marked}");
        }
        // The place the write was made in: the same rule.
        let here = Context {
            repo: Some("前端".into()),
            task: None,
        };
        let none = Places::default();
        let named_here =
            |raw: &str| none.named_in(&Words::read(raw), Some(&here), &Cues::shipped().everyday);
        assert_eq!(named_here("前端代码用两个空格缩进"), Vec::<Scope>::new());
        assert_eq!(named_here("前端仓库用 pnpm"), vec![frontend.clone()]);
    }

    #[test]
    fn an_id_edge_in_chinese_needs_no_boundary_and_others_keep_theirs() {
        assert!(contains_id("后端服务用 yarn", "后端服务"));
        assert!(contains_id("在后端服务里", "后端服务"));
        assert!(contains_id("用web前端的", "web前端"));
        assert!(!contains_id("用newweb前端的", "web前端"));
        assert!(contains_id("前端app 用 yarn", "前端"));
        assert!(!contains_id("c++17", "c++"));
        // A match refused at an edge may overlap one that stands (`xa.a` refused, `a.a` not).
        assert!(contains_id("xa.a.a", "a.a"));
    }

    #[test]
    fn the_shipped_cues_parse() {
        let cues: CueLists = serde_json::from_str(DEFAULT_CUES).expect("assets/scope_cues.json");
        assert!(cues.place.len() > 20 && cues.default.len() > 20);
        assert!(Cues::shipped().matcher.is_some());
        assert!(cues.everyday_ids.len() > 50 && Cues::shipped().everyday.contains("docs"));
    }

    #[derive(Deserialize)]
    struct Labelled {
        raw: Option<String>,
        context: Option<LabelledContext>,
        #[serde(default)]
        known: Vec<String>,
        #[serde(default)]
        siblings: Vec<(String, String)>,
        expect: String,
    }

    #[derive(Deserialize)]
    struct LabelledContext {
        repo: Option<String>,
        task: Option<String>,
    }

    /// The guard over the labelled utterances of tests/data/scope_guard.jsonl: precision and
    /// recall of "not applied silently" (queued, or marked a suspect without a context)
    /// against the labels. Targets: precision ≥ 0.95 (a false queue annoys), recall ≥ 0.85.
    /// `--nocapture` prints the figures and the misses.
    #[test]
    #[allow(clippy::print_stdout)]
    fn precision_and_recall_on_the_labelled_utterances() {
        let data = include_str!("../../tests/data/scope_guard.jsonl");
        let (mut tp, mut fp, mut fneg, mut n) = (0, 0, 0, 0);
        let mut misses = Vec::new();
        for line in data.lines().filter(|l| !l.trim().is_empty()) {
            let l: Labelled = serde_json::from_str(line).expect("a labelled line");
            let known = Places::new(&l.known.iter().map(|k| repo(k)).collect::<Vec<_>>());
            let siblings: Vec<(String, Scope)> = l
                .siblings
                .iter()
                .map(|(p, s)| (p.clone(), Scope::parse(s).expect("a sibling scope")))
                .collect();
            let context = l.context.map(|c| Context {
                repo: c.repo,
                task: c.task,
            });
            let ev = Evidence {
                raw: l.raw.as_deref(),
                words: None,
                context: context.as_ref(),
                known_places: &known,
                siblings: &siblings,
            };
            let verdict = judge(Cues::shipped(), &Scope::Global, &ev, GuardMode::Queue);
            let got = match verdict {
                Verdict::Apply => "apply",
                Verdict::Queue { .. } => "queue",
                Verdict::Suspect { .. } => "suspect",
            };
            let (want_flag, got_flag) = (l.expect != "apply", got != "apply");
            match (want_flag, got_flag) {
                (true, true) => tp += 1,
                (false, true) => fp += 1,
                (true, false) => fneg += 1,
                _ => {}
            }
            if want_flag != got_flag || (want_flag && got != l.expect) {
                misses.push(format!("{got} ≠ {}: {:?}", l.expect, l.raw));
            }
            n += 1;
        }
        let precision = tp as f64 / (tp + fp).max(1) as f64;
        let recall = tp as f64 / (tp + fneg).max(1) as f64;
        println!(
            "scope guard on {n} labelled utterances: precision {precision:.3}, recall {recall:.3}"
        );
        for m in &misses {
            println!("  {m}");
        }
        assert!(n >= 80, "at least 80 labelled utterances, found {n}");
        assert!(precision >= 0.95, "precision {precision:.3}: {misses:#?}");
        assert!(recall >= 0.85, "recall {recall:.3}: {misses:#?}");
    }
}
