// Every link of the article and the navigation: where it points and its text.
() => [...document.querySelectorAll(".md-content article a[href], nav a[href]")]
  .map(a => ({href: a.href, raw: a.getAttribute("href"), text: a.textContent.trim().slice(0, 40)}))
