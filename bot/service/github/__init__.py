"""GitHub: the App's authentication, the installation client, payload parsing and the translation of its
errors. The only package that knows GitHub's URLs and payload shapes; the rest speaks in `models`."""
