"""The plan stage: every decision about what is rendered, in frozen data the templates fill in."""
