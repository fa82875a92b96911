//! The rescope and revert dialogs on a record whose subject, predicate and value are long
//! (Chinese, emoji): the first sentence keeps its end — the version, the source, the scope it
//! moves out of — and the title keeps the predicate and the scope, as the delete dialog does
//! (found by a tester: the rescope dialog's first line lost its ending).

use crate::support::tui::{key, press, render, Fixture};
use crossterm::event::KeyCode;

#[test]
fn a_long_record_keeps_the_end_of_the_rescope_and_revert_sentences() {
    let f = Fixture::empty();
    let subject = format!("用户:{}", "很长的名字🦀".repeat(12));
    let predicate = format!("偏好_{}", "👩🏽‍💻包管理器".repeat(8));
    let value = "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。🎉 ".repeat(20);
    for (n, v) in [(1, "pnpm"), (2, value.as_str())] {
        f.write(&format!(
            r#"{{"subject":"{subject}","predicate":"{predicate}","value":"{v}","scope":"global","source":"thread:{n}/message:9"}}"#
        ));
    }
    for (w, h) in [(120, 32), (100, 30), (80, 24), (60, 15)] {
        let mut s = f.session(w, h);
        press(&mut s, "m");
        let screen = render(&mut s, w, h);
        assert!(
            screen.contains("(v2, thread:2/message:9) out of global."),
            "{w}x{h}, the sentence's end:\n{screen}"
        );
        assert!(
            screen.contains("这个仓库"),
            "{w}x{h}, the value's start:\n{screen}"
        );
        let title = screen
            .lines()
            .find(|l| l.contains("Rescope · "))
            .expect("the title");
        assert!(title.contains("@ global"), "{w}x{h}: {title}");
        assert!(
            title.contains("包管理器"),
            "{w}x{h}: the predicate: {title}"
        );
        s.handle_key(key(KeyCode::Esc));
        s.handle_key(key(KeyCode::Esc));
        press(&mut s, "v");
        let screen = render(&mut s, w, h);
        assert!(
            screen.contains("(v2, thread:2/message:9, "),
            "{w}x{h}, the revert sentence's end:\n{screen}"
        );
        let title = screen
            .lines()
            .find(|l| l.contains("Revert · "))
            .expect("the title");
        assert!(title.contains("@ global"), "{w}x{h}: {title}");
    }
}
