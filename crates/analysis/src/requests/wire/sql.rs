//! The class of an SQL statement: its verb and the first table it names (`SELECT
//! pgbench_accounts`, `UPDATE pgbench_branches`, `BEGIN`), read from the statement's first
//! bytes without parsing SQL: the words that introduce a table in the common statements.

/// Writes the class of the statement `sql` begins with: its verb upper-cased and, for SELECT,
/// INSERT, UPDATE, DELETE, COPY, the first table it names as written. `(empty query)` when it
/// does not begin with a word. Always printable.
pub fn write_statement_class(sql: &[u8], out: &mut String) {
    let mut words = Words { sql };
    let Some(verb) = words.next().filter(|w| identifier(w[0])) else {
        out.push_str("(empty query)");
        return;
    };
    out.push_str(&reqcost_record::printable(verb).to_ascii_uppercase());
    let table = match verb.to_ascii_uppercase().as_slice() {
        b"SELECT" | b"DELETE" => words
            .find(|w| w.eq_ignore_ascii_case(b"FROM"))
            .and(words.next()),
        b"INSERT" => words
            .find(|w| w.eq_ignore_ascii_case(b"INTO"))
            .and(words.next()),
        b"UPDATE" | b"COPY" => words.find(|w| !w.eq_ignore_ascii_case(b"ONLY")),
        _ => None,
    };
    if let Some(table) = table.filter(|t| identifier(t[0]) || t[0] == b'"') {
        out.push(' ');
        out.push_str(&reqcost_record::printable(table));
    }
}

/// The words of SQL text: identifiers (quoted ones whole, dotted names whole) and single
/// punctuation bytes, past white space and comments.
struct Words<'a> {
    sql: &'a [u8],
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        self.skip_blanks();
        let first = *self.sql.first()?;
        let len = if first == b'"' {
            self.sql[1..]
                .iter()
                .position(|&b| b == b'"')
                .map_or(self.sql.len(), |at| at + 2)
        } else if identifier(first) {
            self.sql
                .iter()
                .position(|&b| !identifier(b) && b != b'.')
                .unwrap_or(self.sql.len())
        } else {
            1
        };
        let (word, rest) = self.sql.split_at(len);
        self.sql = rest;
        Some(word)
    }
}

impl Words<'_> {
    fn skip_blanks(&mut self) {
        loop {
            let before = self.sql.len();
            self.sql = self.sql.trim_ascii_start();
            if let Some(rest) = self.sql.strip_prefix(b"--") {
                let end = rest
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(rest.len(), |at| at + 1);
                self.sql = &rest[end..];
            } else if let Some(rest) = self.sql.strip_prefix(b"/*") {
                let end = rest
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(rest.len(), |at| at + 2);
                self.sql = &rest[end..];
            }
            if self.sql.len() == before {
                return;
            }
        }
    }
}

fn identifier(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}
