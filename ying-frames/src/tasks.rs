//! What a tokio task cell's type tells of its task: the future it runs, as a user names it, and whether it is the
//! runtime's own. Read by the runtime as it names the tasks a test left, and by the flamegraphs, which mark a retained
//! task cell with its future. A thread a test left running is told by the same means (`threads_left`).

use ying_report::report::{Reach, RetainedSite, TaskEntry, Why};

/// What std names the closure a spawned thread runs (and owns while it runs): its `main`, whose first generic
/// argument is the user's closure.
const THREAD_MAIN: [&str; 2] =
    ["std::thread::lifecycle::spawn_unchecked::{closure_env#", "std::thread::Builder::spawn_unchecked_::{closure_env#"];

/// The threads a test started and left running, from its retained `sites`: a site of std's spawned thread's `main`
/// closure, which lives as long as the thread runs, held on that thread's stack. Each gets the thread's name (the
/// stack's), the user's closure, the spawn's `file:line` (the site's user frame) and the bytes the thread's stack
/// holds of the test's memory.
pub fn threads_left(sites: &[RetainedSite]) -> Vec<TaskEntry> {
    let held_by = |name: &str| -> u64 {
        let on_its_stack = |why: &&Why| why.kind == Reach::ThreadStack && why.root.as_deref() == Some(name);
        sites.iter().flat_map(|site| site.why.iter().filter(on_its_stack)).map(|why| why.bytes).sum()
    };
    sites
        .iter()
        .filter(|site| {
            site.type_name.as_deref().is_some_and(|name| THREAD_MAIN.iter().any(|main| name.starts_with(main)))
        })
        .filter_map(|site| {
            let name = site.why.iter().find(|why| why.kind == Reach::ThreadStack)?.root.clone();
            let closure = site.type_name.as_deref().and_then(first_argument).map(as_the_user_names_it);
            let spawned_at = crate::fold::user_frame(&site.frames).and_then(|index| {
                let frame = &site.frames[index];
                Some(format!("{}:{}", frame.file.as_deref()?, frame.line?))
            });
            let bytes = name.as_deref().map_or(site.bytes, held_by);
            Some(TaskEntry::thread(name, closure, spawned_at, bytes))
        })
        .collect()
}

/// The first generic argument of a type: `T` of `Name<T, U>`.
fn first_argument(type_name: &str) -> Option<&str> {
    let arguments = &type_name[type_name.find('<')? + 1..];
    let mut depth = 0usize;
    let end = arguments.char_indices().find_map(|(at, char)| {
        match char {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            ',' | '>' if depth == 0 => return Some(at),
            _ => {}
        }
        None
    })?;
    Some(arguments[..end].trim())
}

/// The future a task runs, when `type_name` (a block's allocated type) is a tokio task's cell: as
/// [`future_of_cell`] names it.
///
/// ```
/// let cell = "tokio::runtime::task::core::Cell<app::serve::{async_fn_env#0}, alloc::sync::Arc<H>>";
/// assert_eq!(ying_frames::tasks::task_of(cell).as_deref(), Some("app::serve"));
/// assert_eq!(ying_frames::tasks::task_of("alloc::vec::Vec<u8>"), None);
/// ```
pub fn task_of(type_name: &str) -> Option<String> {
    type_name.starts_with(crate::known_code::TASK_CELL).then(|| future_of_cell(type_name)).flatten()
}

/// The future a task cell's type runs, as a user names it: the first generic argument of
/// `tokio::runtime::task::core::Cell<F, S>`, an async fn's state machine named by its function
/// (`my_crate::fetch::{async_fn_env#0}` is `my_crate::fetch`).
pub fn future_of_cell(cell: &str) -> Option<String> {
    first_argument(&cell[cell.find("Cell<")?..]).map(as_the_user_names_it)
}

/// A future's or a closure's type as a user names it: an async fn's state machine by its function (`my_crate::fetch`),
/// a closure (one `spawn_blocking` runs, one a value captured its owner in) or an async block by the function it is
/// in (`my_crate::load::{closure}`, the closures and blocks the test attributes wrap a body in left out); a type with
/// generic arguments as it is.
///
/// ```
/// use ying_frames::tasks::as_the_user_names_it;
/// assert_eq!(as_the_user_names_it("app::open::{closure#0}::{closure_env#0}<>"), "app::open::{closure}");
/// assert_eq!(as_the_user_names_it("app::fetch::{async_fn_env#0}"), "app::fetch");
/// ```
pub fn as_the_user_names_it(future: &str) -> String {
    let future = future.strip_prefix(BLOCKING_TASK).and_then(|closure| closure.strip_suffix('>')).unwrap_or(future);
    // A generic function's closure or block has the function's arguments after it: the place names it alone.
    let future = match future.find('<') {
        Some(at) if future[..at].ends_with('}') && future.ends_with('>') => &future[..at],
        _ => future,
    };
    if future.contains('<') || !future.ends_with('}') {
        return future.to_owned();
    }
    let (path, last) = future.rsplit_once("::").unwrap_or(("", future));
    let shown = match last.split('#').next() {
        Some("{async_fn_env") => return path.to_owned(),
        Some("{closure_env") => "{closure}",
        Some("{async_block_env") => "{async block}",
        _ => return future.to_owned(),
    };
    // The function it is in: the closures and blocks it is nested in left out.
    let mut function = path;
    while let Some((outer, segment)) = function.rsplit_once("::")
        && segment.starts_with('{')
    {
        function = outer;
    }
    format!("{function}::{shown}")
}

/// The prefix of the future of a task `spawn_blocking` spawned: the closure it runs follows, then `>`.
const BLOCKING_TASK: &str = "tokio::runtime::blocking::task::BlockingTask<";

/// Whether a task running `future` is the runtime's own: tokio's code, or tokio's code on its blocking pool (a
/// multi-thread runtime's workers).
pub fn is_the_runtimes_own(future: &str) -> bool {
    future.strip_prefix(BLOCKING_TASK).unwrap_or(future).starts_with("tokio::")
}

#[cfg(test)]
mod tests {
    use super::{future_of_cell, is_the_runtimes_own, threads_left};
    use ying_report::Frame;
    use ying_report::report::{Reach, RetainedSite, TaskKind, Why};

    #[test]
    fn a_thread_left_running_is_its_main_closure_held_on_its_own_stack() {
        let frames = || vec![Frame::new("app::starts", Some("tests/app.rs".into()), Some(9))];
        let held = |bytes| Why { kind: Reach::ThreadStack, root: Some("ticker".into()), bytes, blocks: 1 };
        let mut main = RetainedSite::new(40, 1, false, frames());
        main.type_name = Some(
            "std::thread::lifecycle::spawn_unchecked::{closure_env#1}<app::starts::{closure#0}::{closure_env#0}, ()>"
                .into(),
        );
        main.why = vec![held(40)];
        let mut packet = RetainedSite::new(48, 1, false, frames());
        packet.type_name = Some("std::thread::lifecycle::Packet<()>".into());
        packet.why = vec![held(48)];
        let threads = threads_left(&[main.clone(), packet.clone()]);
        assert_eq!(threads.len(), 1, "{threads:?}");
        let thread = &threads[0];
        assert_eq!((thread.kind, thread.thread.as_deref()), (TaskKind::Thread, Some("ticker")));
        assert_eq!(
            (thread.future.as_deref(), thread.spawned_at.as_deref()),
            (Some("app::starts::{closure}"), Some("tests/app.rs:9"))
        );
        assert_eq!(thread.bytes, 88, "all its stack holds of the test's memory");
        assert_eq!(
            thread.to_string(),
            "thread `ticker` left running `app::starts::{closure}`, spawned at tests/app.rs:9, 88 B"
        );
        // A thread that ended keeps no `main`: its packet, kept by a handle, is no thread left running.
        assert!(threads_left(&[packet]).is_empty());
    }

    #[test]
    fn the_runtimes_workers_are_its_own_and_a_users_blocking_closure_is_not() {
        let worker = "tokio::runtime::blocking::task::BlockingTask<tokio::runtime::scheduler::multi_thread::worker::\
                      {impl#0}::launch::{closure_env#0}>";
        assert!(is_the_runtimes_own(worker));
        assert!(!is_the_runtimes_own("tokio::runtime::blocking::task::BlockingTask<my_crate::load::{closure_env#0}>"));
        assert!(!is_the_runtimes_own("my_crate::fetch"));
    }

    #[test]
    fn a_cells_future_is_its_first_generic_argument_an_async_fn_by_its_name() {
        let cell = "tokio::runtime::task::core::Cell<my_crate::fetch::{async_fn_env#0}, \
                    alloc::sync::Arc<tokio::runtime::scheduler::current_thread::Handle>>";
        assert_eq!(future_of_cell(cell).as_deref(), Some("my_crate::fetch"));
        let block = "tokio::runtime::task::core::Cell<core::future::poll_fn::PollFn<my_crate::run::{closure_env#0}>, \
                     alloc::sync::Arc<tokio::runtime::scheduler::multi_thread::handle::Handle>>";
        assert_eq!(
            future_of_cell(block).as_deref(),
            Some("core::future::poll_fn::PollFn<my_crate::run::{closure_env#0}>")
        );
        assert_eq!(future_of_cell("alloc::vec::Vec<u8>"), None);
        let blocking = "tokio::runtime::task::core::Cell<tokio::runtime::blocking::task::BlockingTask<tasks::drops_a_set\
                        ::{closure#0}::{async_block#0}::{async_block#0}::{closure_env#0}>, \
                        tokio::runtime::blocking::schedule::BlockingSchedule>";
        assert_eq!(future_of_cell(blocking).as_deref(), Some("tasks::drops_a_set::{closure}"));
        let block = "tokio::runtime::task::core::Cell<my_crate::serve::{async_block_env#1}, alloc::sync::Arc<H>>";
        assert_eq!(future_of_cell(block).as_deref(), Some("my_crate::serve::{async block}"));
        let generic = "tokio::runtime::task::core::Cell<tokio_util::task::spawn_pinned::{impl#2}::spawn_pinned::\
                       {async_block#0}::{closure#0}::{async_block_env#0}<t::{closure_env#0}, t::{async_block_env#0}>, \
                       alloc::sync::Arc<H>>";
        assert_eq!(
            future_of_cell(generic).as_deref(),
            Some("tokio_util::task::spawn_pinned::{impl#2}::spawn_pinned::{async block}")
        );
    }
}
