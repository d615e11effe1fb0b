"""Each command's core, named after the command: frames in, frames or plain values out."""
