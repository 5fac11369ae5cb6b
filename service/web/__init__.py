"""The Memory page (`/memory`) and the offline API docs (`/docs`), served by Mneme itself."""
