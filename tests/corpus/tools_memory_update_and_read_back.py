# expect: ok
page = create_detail_page("Preferences", "What the user likes", "Dark mode.", "usr-0")
update_page(page, detail="Dark mode; metric units.")
__result__ = get_page(page)["detail"]
