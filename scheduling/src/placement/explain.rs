//! The sentence a placement is recorded with ("placed on node-3: weights
//! cached"), shared by the live scheduler's task events and `caldera sim`, so
//! a person reads the same words in both.

/// `placed on <node>`, followed by what decided or helped the choice when
/// there is something to say (see [`crate::placement::Placer::explain`]).
pub fn placed_on(node: &str, note: Option<&str>) -> String {
    match note {
        Some(note) => format!("placed on {node}: {note}"),
        None => format!("placed on {node}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_follows_the_node() {
        assert_eq!(
            placed_on("node-3", Some("weights cached")),
            "placed on node-3: weights cached"
        );
        assert_eq!(placed_on("n2", None), "placed on n2");
    }
}
