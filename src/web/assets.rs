//! The page's stylesheet and script, compiled into the binary: nothing is fetched from
//! elsewhere, and the Content-Security-Policy allows only these.

/// `/assets/NAME`: its content type and body.
pub fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "style.css" => Some(("text/css; charset=utf-8", include_str!("assets/style.css"))),
        "live.js" => Some((
            "text/javascript; charset=utf-8",
            include_str!("assets/live.js"),
        )),
        _ => None,
    }
}
