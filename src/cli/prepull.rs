//! `caldera prepull IMAGE (--nodes a,b | --count N)`: pull an image onto
//! nodes before a rollout (operator token).
use super::client::{block_on, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::CliError;
use caldera_spec::views::Prepulled;
use serde_json::{json, Value};

/// `caldera prepull IMAGE (--nodes a,b | --count N)`
#[derive(clap::Args, Debug)]
pub struct PrepullArgs {
    /// The image, as a task names it.
    pub image: String,
    /// These nodes.
    #[arg(long, value_delimiter = ',', conflicts_with = "count")]
    pub nodes: Vec<String>,
    /// This many connected nodes with a container runtime up that do not
    /// hold the image yet.
    #[arg(long)]
    pub count: Option<u32>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// The request body `args` make.
fn body(args: &PrepullArgs) -> Result<Value, CliError> {
    match (args.nodes.is_empty(), args.count) {
        (false, None) => Ok(json!({"image": args.image, "nodes": args.nodes})),
        (true, Some(n)) => Ok(json!({"image": args.image, "count": n})),
        _ => Err(CliError::Usage("give --nodes a,b or --count N".into())),
    }
}

/// What the answer says, for a person.
fn render(image: &str, data: &Prepulled) -> String {
    let mut out = format!("pulling {image} on: {}\n", or_none(&data.pulling));
    if !data.waiting.is_empty() {
        out.push_str(&format!(
            "waiting for a pull slot (max-image-pulls): {}\n",
            data.waiting.join(", ")
        ));
    }
    out
}

fn or_none(v: &[String]) -> String {
    match v.is_empty() {
        true => "none".into(),
        false => v.join(", "),
    }
}

pub fn run(args: PrepullArgs) -> Result<(), CliError> {
    let body = body(&args)?;
    let client = ApiClient::from_opts(&args.opts)?;
    let data = block_on(client.send_json(Verb::Post, "/v1/images/prepull", &body))?.data;
    if args.opts.json {
        return print_json(&data);
    }
    print!("{}", render(&args.image, &read_view(&data)?));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_where_it_pulls_and_where_it_waits() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let data = Prepulled {
            nodes: names(&["a", "b", "c"]),
            pulling: names(&["a", "b"]),
            waiting: names(&["c"]),
        };
        assert_eq!(
            render("r.io/x:1", &data),
            "pulling r.io/x:1 on: a, b\nwaiting for a pull slot (max-image-pulls): c\n"
        );
        let none = Prepulled {
            nodes: vec![],
            pulling: vec![],
            waiting: vec![],
        };
        assert_eq!(render("r.io/x:1", &none), "pulling r.io/x:1 on: none\n");
    }
}
