//! A step's standard output as the agent keeps it for `result`: its first bytes (one past what
//! a termination message holds), and how many there were.

use workflow_operator_core::outputs::MAX_OUTPUTS_BYTES;

/// A command's standard output as kept: its first bytes, and how many it wrote.
pub(super) struct Stdout {
    pub(super) kept: Vec<u8>,
    pub(super) total: usize,
}

impl Stdout {
    /// The bytes, when all were kept.
    ///
    /// # Errors
    /// Its size, when it is too large for a termination message.
    pub(super) fn result(self) -> Result<Vec<u8>, String> {
        if self.total > MAX_OUTPUTS_BYTES {
            return Err(format!(
                "the standard output (result) is {} bytes, more than the {MAX_OUTPUTS_BYTES} \
                 bytes of a termination message: pass large values as an artifact \
                 (outputs.artifacts)",
                self.total
            ));
        }
        Ok(self.kept)
    }
}
