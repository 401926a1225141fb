//! Plain-text tables and key/value blocks for the CLI's default output.
//!
//! Columns are padded to their widest cell (counted in characters, not bytes,
//! so model names with non-ASCII text still line up); the last column is not
//! padded so lines carry no trailing spaces that would upset `diff` and `grep`.

/// Gap between two columns.
const GAP: &str = "  ";

/// A table with a header row, rendered with aligned columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are shown as "-", extra cells are kept
    /// so nothing the caller computed is silently dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, each ending with a newline.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.headers.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            for (i, cell) in line.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = line.get(i).map(String::as_str).unwrap_or("-");
                if i + 1 < columns {
                    text.push_str(cell);
                    text.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
                    text.push_str(GAP);
                } else {
                    text.push_str(cell);
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `key: value` lines with the values aligned, for single-object views
/// (`status`, `nodes NAME`).
pub fn key_values(pairs: &[(&str, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value) in pairs {
        if value.is_empty() {
            out.push_str(&format!("{key}:\n"));
        } else {
            let pad = " ".repeat(width - key.chars().count());
            out.push_str(&format!("{key}:{pad}{GAP}{value}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_to_the_widest_cell() {
        let mut t = Table::new(&["ID", "STATE", "NODE"]);
        t.row(vec!["train_1".into(), "running".into(), "node-1".into()]);
        t.row(vec!["a".into(), "queued".into(), "-".into()]);
        assert_eq!(
            t.render(),
            "ID       STATE    NODE\n\
             train_1  running  node-1\n\
             a        queued   -\n"
        );
    }

    #[test]
    fn missing_cells_show_a_dash_and_lines_have_no_trailing_spaces() {
        let mut t = Table::new(&["A", "B", "C"]);
        t.row(vec!["x".into()]);
        t.row(vec!["y".into(), "long value".into(), String::new()]);
        let text = t.render();
        assert_eq!(text, "A  B           C\nx  -           -\ny  long value\n");
        assert!(text.lines().all(|l| !l.ends_with(' ')));
    }

    #[test]
    fn width_counts_characters_not_bytes() {
        let mut t = Table::new(&["MODEL", "N"]);
        t.row(vec!["Größe".into(), "1".into()]);
        t.row(vec!["A100".into(), "2".into()]);
        assert_eq!(t.render(), "MODEL  N\nGröße  1\nA100   2\n");
    }

    #[test]
    fn an_empty_table_is_its_header() {
        let t = Table::new(&["NAME", "STATE"]);
        assert_eq!(t.render(), "NAME  STATE\n");
    }

    #[test]
    fn key_values_align_the_values() {
        let text = key_values(&[
            ("task", "t1".into()),
            ("exit code", "0".into()),
            ("note", String::new()),
        ]);
        assert_eq!(text, "task:       t1\nexit code:  0\nnote:\n");
    }
}
