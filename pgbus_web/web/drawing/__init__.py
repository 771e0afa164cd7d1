"""What the templates draw with: cells and rows, the timeline, filter chips, the frame, the names templates call."""
