//! What croner takes but a user cannot have meant: a misspelt macro (`@evry`), named with the
//! one meant, and a step beyond its field's range (`*/61` minutes runs once an hour, not every
//! 61 minutes), refused before the expression is parsed.

/// The macros a schedule may start with.
const MACROS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every",
];

/// The five fields of a cron expression, with the values each takes.
const FIELDS: [(&str, u32, u32); 5] = [
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of the month", 1, 31),
    ("month", 1, 12),
    ("day of the week", 0, 7),
];

/// Why `text` cannot mean what it says, if it cannot.
pub(super) fn check(text: &str) -> Result<(), String> {
    if let Some(word) = text
        .split_whitespace()
        .next()
        .filter(|w| w.starts_with('@'))
    {
        return known_macro(word);
    }
    for (field, (name, min, max)) in text.split_whitespace().zip(FIELDS) {
        for part in field.split(',') {
            let step = part
                .split_once('/')
                .and_then(|(_, step)| step.parse::<u32>().ok());
            if let Some(step) = step.filter(|step| *step > max) {
                return Err(format!(
                    "the {name}'s step {step} is beyond its range {min}-{max}"
                ));
            }
        }
    }
    Ok(())
}

/// `word` is a macro, or the error names the nearest one.
fn known_macro(word: &str) -> Result<(), String> {
    if MACROS.contains(&word) {
        return Ok(());
    }
    let nearest = MACROS
        .iter()
        .map(|known| (strsim::damerau_levenshtein(word, known), known))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance);
    Err(match nearest {
        Some((_, meant)) => format!("unknown {word:?}: did you mean {meant:?}?"),
        None => format!("unknown {word:?}: the macros are {}", MACROS.join(", ")),
    })
}
