"""The words and labels every door shows: a run's badge and sentence, a
verb's label, moments and durations, the sentence after an act, the mark
on a stored value the page cannot show the usual way. No I/O."""
