# expect: ok
root = [s for s in list_segments() if s["permission"] == "read_write"][0]["root_index"]
create_detail_page("Deploy checklist", "How we ship the API", "Run the migrations, then make deploy on the bastion.", root)
create_detail_page("Coffee order", "The team's usual order", "Two flat whites and an oat latte.", root)
hits = find_page("deploy migrations")
__result__ = [h["name"] for h in hits]
