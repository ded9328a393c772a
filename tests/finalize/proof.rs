//! (the proof: written next)
