"""Privacy of what the glasses record: bystander faces blurred before a frame is stored,
pauses, retention of raw media and the export of what is held about a user."""
